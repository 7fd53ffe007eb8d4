# Helpers for guest scenarios (busybox sh). Output goes to the console, which the runner
# parses: a block is the lines between "@@@BEGIN name" and "@@@END name".

begin() { echo "@@@BEGIN $1"; }
end() { echo "@@@END $1"; }

# block NAME COMMAND...: the command's output as one block.
block() {
  name=$1; shift
  begin "$name"; "$@"; end "$name"
}

# Starts rdmascope serve on :9879 and waits until it answers.
start_exporter() {
  rdmascope serve --web.listen-address=:9879 "$@" >/tmp/rdmascope.log 2>&1 &
  for i in $(seq 100); do
    wget -q -O /dev/null http://127.0.0.1:9879/metrics 2>/dev/null && return 0
    sleep 0.1
  done
  cat /tmp/rdmascope.log
  echo "@@@LAB-ERROR rdmascope did not start"
  return 1
}

scrape() { wget -q -O - http://127.0.0.1:9879/metrics; }

# Every file of a sysfs directory as "name value" lines.
dump_dir() {
  for f in "$1"/*; do
    [ -f "$f" ] && echo "$(basename "$f") $(cat "$f" 2>/dev/null)"
  done
}

# Tells the host runner we wait for it (e.g. to scrape from outside) and waits for its reply.
wait_for_host() {
  echo "@@@WAIT $1"
  read -r -t "${2:-90}" reply || echo "@@@LAB-ERROR no reply from the host for $1"
}

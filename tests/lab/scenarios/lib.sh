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
  # Up to a minute: under TCG attaching the kernel MR path's trampolines takes seconds each.
  for i in $(seq 600); do
    wget -q -O /dev/null http://127.0.0.1:9879/metrics 2>/dev/null && return 0
    sleep 0.1
  done
  cat /tmp/rdmascope.log
  echo "@@@LAB-ERROR rdmascope did not start"
  return 1
}

scrape() { wget -q -O - http://127.0.0.1:9879/metrics; }

# wait_metric PATTERN [SECONDS]: scrapes until a line matches the grep pattern (the guest runs
# under TCG: a fixed sleep is too short on a loaded CI host). Says so on the console if not.
wait_metric() {
  for i in $(seq $((${2:-20} * 5))); do
    scrape 2>/dev/null | grep -q -- "$1" && return 0
    sleep 0.2
  done
  echo "@@@LAB-NOTE metric never matched: $1"
  return 1
}

# wait_file FILE [SECONDS]: waits until a helper program creates FILE (its "ready" or "stepped"
# file), 10 s by default; says so on the console if it never does.
wait_file() {
  for i in $(seq $((${2:-10} * 10))); do
    [ -e "$1" ] && return 0
    sleep 0.1
  done
  echo "@@@LAB-NOTE never appeared: $1"
  return 1
}

# client SERVER_PID COMMAND...: runs a perftest/pingpong client, again every 0.5 s while the
# server lives, until it connects: the client gives up at once if the server does not listen
# yet, and a fixed sleep before it is too short on a loaded host. Prints the last attempt.
client() {
  server_pid=$1; shift
  for i in $(seq 30); do
    sleep 0.5
    "$@" >/tmp/client.attempt 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || break
  done
  cat /tmp/client.attempt
}

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

# soak: the exporter on the kernel MR path (fentry/fexit on uverbs/ib_core, chosen
# automatically) under a bounded churn on rxe0 through the real libibverbs (soak_mr_verbs, the
# workloads of tests/soak/soak_mr.c): one process's registration churn (a ring of regions, one
# rejected registration per 1,024), short processes (half exit with regions registered, which
# the kernel releases), veth interfaces created and deleted; scraped in the guest every
# INTERVAL s. Each round prints only what soak.py checks (filtered rdma_mr_* series of the soak's
# comms, collector status, RSS, veth names) as a "round-*" block: the console is slow under TCG.
# rdmascope.soak_scale=N on the kernel command line (run_scenario.py --append, or
# RDMASCOPE_LAB_APPEND) multiplies the churn, the processes and the veths.
. /scenarios/lib.sh

SCALE=$(sed -n 's/.*rdmascope\.soak_scale=\([0-9][0-9]*\).*/\1/p' /proc/cmdline)
SCALE=${SCALE:-1}
CHURN=$((20000 * SCALE)) RING=100
PROCS=$((200 * SCALE)) REGIONS=20 LEAK=5 PARALLEL=2
VETHS=$((40 * SCALE)) VETH_BATCH=10
WARM_CHURN=2000 WARM_PROCS=10 WARM_VETHS=10
INTERVAL=1
STACKS_SLACK=2
echo "@@@SOAK-PLAN scale=$SCALE churn=$CHURN ring=$RING procs=$PROCS regions=$REGIONS" \
  "leak=$LEAK veths=$VETHS warm_churn=$WARM_CHURN warm_procs=$WARM_PROCS warm_veths=$WARM_VETHS"
export SOAK_MR_DEVICE=rxe0

MR='^rdma_mr_(registrations_total|deregistrations_total|registration_failures_total|outstanding_regions|outstanding_bytes|exit_released_regions_total|exit_released_bytes_total|registration_size_bytes_count)\{[^}]*comm="soak_'

# round NAME: one scrape, filtered, as the block NAME (written at once: rounds never overlap).
round() {
  {
    begin "$1"
    if wget -q -O /tmp/round.prom http://127.0.0.1:9879/metrics 2>/dev/null; then
      echo "scrape_ok 1"
      grep -E "$MR" /tmp/round.prom
      grep -E '^rdma_mr_lost_total|^rdmascope_collector_success|^rdmascope_probe_attached\{probe="mr_kernel"\}' /tmp/round.prom
      grep -oE 'device="(sk[0-9]+|veth[0-9]+)"' /tmp/round.prom | sort -u | sed 's/^/soak_veth_seen{/; s/$/} 1/'
    else
      echo "scrape_ok 0"
    fi
    rss=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$exporter/status")
    echo "soak_rss_kib ${rss:-NaN}"
    end "$1"
  } >/tmp/round.out
  cat /tmp/round.out
}

# Rounds every INTERVAL s in the background until stop_scraper; the count of rounds done in
# /tmp/scraper.n (replaced, never rewritten in place).
start_scraper() {
  rm -f /tmp/scraper.stop
  echo 0 >/tmp/scraper.n
  (
    n=0
    while [ ! -e /tmp/scraper.stop ]; do
      n=$((n + 1))
      round "round-$1-$n"
      echo $n >/tmp/scraper.n.new && mv /tmp/scraper.n.new /tmp/scraper.n
      sleep $INTERVAL
    done
  ) &
  scraper=$!
}

# wait_rounds N: until the scraper has done N more rounds (a minute at most).
wait_rounds() {
  first=$(cat /tmp/scraper.n)
  for w in $(seq 600); do
    [ $(($(cat /tmp/scraper.n) - first)) -ge "$1" ] && return 0
    sleep 0.1
  done
  return 1
}
stop_scraper() { touch /tmp/scraper.stop; wait "$scraper"; }

# Entries of the exporter's hash and stack-trace maps that must come back (bpftool -j: one
# "key":[...] per entry; the BTF-formatted key is not an array for these maps).
maps() {
  if ! command -v bpftool >/dev/null; then
    echo "soak_bpftool_missing 1"
    return
  fi
  bpftool map show | sed -n 's/^\([0-9]*\): .* name \([a-z_]*\) .*/\1 \2/p' |
    while read -r id name; do
      case $name in
        regions | procs | stacks | kcalls | kderegs | owners)
          if bpftool -j map dump id "$id" >/tmp/map.json 2>/dev/null; then
            echo "soak_map_entries{map=\"$name\"} $(grep -o '"key":\[' /tmp/map.json | wc -l)"
          else
            echo "soak_map_unreadable{map=\"$name\"} 1"
          fi
          ;;
      esac
    done
}

# veths FIRST COUNT: COUNT veths named skFIRST.. (busybox names the peers vethN), created
# VETH_BATCH at a time, kept for two rounds of the scraper (so scraped at least once), deleted.
veths() {
  i=$1 last=$(($1 + $2))
  while [ "$i" -lt "$last" ]; do
    b=$i
    while [ "$b" -lt $((i + VETH_BATCH)) ] && [ "$b" -lt "$last" ]; do
      ip link add "sk$b" type veth && ip link set "sk$b" up || echo "@@@LAB-ERROR ip link add sk$b"
      b=$((b + 1))
    done
    wait_rounds 2
    b=$i
    while [ "$b" -lt $((i + VETH_BATCH)) ] && [ "$b" -lt "$last" ]; do
      ip link del "sk$b" || echo "@@@LAB-ERROR ip link del sk$b"
      b=$((b + 1))
    done
    i=$((i + VETH_BATCH))
  done
}

# phase NAME CHURN PROCS VETH_FIRST VETHS [HOLD]: the three churns at once, scraped; with HOLD
# the churn process stays (all regions deregistered) until killed: its pid in $churn.
phase() {
  start_scraper "$1"
  SOAK_MR_HOLD=${6:-0} soak_mr_verbs churn "$2" $RING >"/tmp/$1.churn" 2>&1 &
  churn=$!
  soak_mr_verbs procs "$3" $REGIONS $LEAK $PARALLEL >"/tmp/$1.procs" 2>&1 &
  procs=$!
  veths "$4" "$5" >"/tmp/$1.veths" 2>&1 &
  veth_loop=$!
  started=$(date +%s)
  wait $procs
  wait $veth_loop
  if [ -n "$6" ]; then
    for i in $(seq 6000); do grep -q DONE "/tmp/$1.churn" && break; sleep 0.1; done
  else
    wait $churn
  fi
  seconds=$(($(date +%s) - started))
  stop_scraper
  begin "result-$1"
  echo "seconds $seconds"
  echo "uptime $(cut -d' ' -f1 /proc/uptime)"
  cat "/tmp/$1.churn" "/tmp/$1.procs" "/tmp/$1.veths"
  end "result-$1"
}

start_exporter --collector.disable-defaults --collector.mr --collector.ethtool || exit 1
exporter=$!
round round-start
block maps_start maps

phase warm $WARM_CHURN $WARM_PROCS 1000 $WARM_VETHS
# Two more collections (the exporter drops exited processes at collections), then the counts.
round round-warm-end-1
sleep $INTERVAL
round round-warm-end
maps >/tmp/maps
block maps_warm cat /tmp/maps
warm_stacks=$(sed -n 's/^soak_map_entries{map="stacks"} //p' /tmp/maps)

phase soak $CHURN $PROCS 0 $VETHS 1
round round-hold
echo "@@@SOAK-CHURN-PID $churn"
kill "$churn"
wait "$churn" 2>/dev/null

# The exporter drops the stacks no region uses at collections (two walks at least 5 s apart
# after the last exit): scrape until the stack-trace map is back, up to a minute.
for n in $(seq 30); do
  sleep 2
  round "round-end-$n"
  maps >/tmp/maps
  block "maps-end-$n" cat /tmp/maps
  stacks=$(sed -n 's/^soak_map_entries{map="stacks"} //p' /tmp/maps)
  [ -z "$stacks" ] || [ -z "$warm_stacks" ] && break
  [ "$stacks" -le $((warm_stacks + STACKS_SLACK)) ] && break
done
round round-final
echo "@@@SOAK-END uptime $(cut -d' ' -f1 /proc/uptime)"
block log tail -n 40 /tmp/rdmascope.log
true

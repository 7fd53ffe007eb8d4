# mr_restart: regions registered before the exporter started (issue #18 item 4). A program
# registers 5 regions of known sizes; an exporter started afterwards counts them exactly
# (seeded from the kernel's restrack); the program then deregisters 2 and registers 2 more:
# the counts follow, the new ones counted once; a restarted exporter finds the same figures;
# after the program exits its series are gone. Default MR tracking (the kernel path here).
# The 5 are registered by a thread that has exited by then: restrack lists them without a
# pid, and they are found to be the program's through their PD.
. /scenarios/lib.sh
SIZES=65536,65536,131072,262144,4096
EXTRA=8192,16384

rm -f /tmp/holder.ready /tmp/holder.step /tmp/holder.stepped
mr_holder rxe0 $SIZES /tmp/holder.ready /tmp/holder.step /tmp/holder.stepped 2 $EXTRA \
  >/tmp/holder.out 2>&1 &
holder=$!
wait_file /tmp/holder.ready 30
[ -e /tmp/holder.ready ] || { cat /tmp/holder.out; echo "@@@LAB-ERROR mr_holder never got ready"; }
echo "@@@HOLDER-PID $holder"
block restrack_before rdma res show mr

start_exporter || exit 1
exporter=$!
block scrape_seeded scrape

touch /tmp/holder.step
wait_file /tmp/holder.stepped 30
[ -e /tmp/holder.stepped ] || { cat /tmp/holder.out; echo "@@@LAB-ERROR mr_holder never stepped"; }
block restrack_after rdma res show mr
block scrape_followed scrape

# A restart: every region the program holds now predates the exporter.
kill $exporter
wait $exporter 2>/dev/null
block first_exporter_log cat /tmp/rdmascope.log
start_exporter || exit 1
exporter=$!
block scrape_restarted scrape

kill $holder
wait $holder 2>/dev/null
# The kernel releases its regions as the process exits: until restrack lists none of them.
for i in $(seq 100); do rdma res show mr | grep -q "pid $holder " || break; sleep 0.1; done
block scrape_after_exit scrape
block exporter_log cat /tmp/rdmascope.log

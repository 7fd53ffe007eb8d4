# profile: `rdmascope profile` on a real soft-RoCE host (issue #14's lab tests).
# (a) -- mr_leaker: the leaking function named with the regions left when it is killed.
# (b) -- ibv_rc_pingpong -s 2048 (the server, under the preload library): 2048-byte messages and
#     a non-zero completion latency.
# (c) --pid on a running ib_write_bw server: its traffic in the port counters, its
#     registrations (made once connected, after the attach).
. /scenarios/lib.sh
# The guest has the preload library beside the other helpers, not beside rdmascope.
COLLECTORS="--collector.disable-defaults --collector.rdma --collector.mr --collector.verbs \
  --collector.resources --collector.occupancy --preload=/usr/bin/librdmascope_preload.so"

# (a) 8 regions of 16 KiB, one every 200 ms, then it sleeps until killed.
rm -f /tmp/leaker.ready
# shellcheck disable=SC2086  # word splitting of $COLLECTORS is meant
rdmascope profile $COLLECTORS --interval 250ms --duration 120s --output /tmp/prof_leak \
  -- mr_leaker rxe0 8 16384 /tmp/leaker.ready 200 >/tmp/leak.out 2>/tmp/leak.err &
profile=$!
wait_file /tmp/leaker.ready 30
sleep 4  # the other 7 regions, and samples of the live process
kill "$(pidof mr_leaker)"
wait $profile
echo "@@@EXIT-LEAK $?"
block leak_summary cat /tmp/leak.out
block leak_log cat /tmp/leak.err
block leak_json cat /tmp/prof_leak/profile.json
block leak_folded cat /tmp/prof_leak/outstanding_bytes.folded
block leak_pprof sh -c 'zcat /tmp/prof_leak/profile.pb.gz | strings'

# (b) The pingpong server under the profile; the client outside it.
# shellcheck disable=SC2086
rdmascope profile $COLLECTORS --interval 500ms --duration 120s --output /tmp/prof_pp \
  -- ibv_rc_pingpong -d rxe0 -g 1 -n 1000 -s 2048 >/tmp/pp.out 2>/tmp/pp.err &
profile=$!
client $profile ibv_rc_pingpong -d rxe0 -g 1 -n 1000 -s 2048 127.0.0.1 >/tmp/client.out
wait $profile
echo "@@@EXIT-PP $?"
block pp_summary cat /tmp/pp.out
block pp_log cat /tmp/pp.err
block pp_json cat /tmp/prof_pp/profile.json

# (c) --pid on an ib_write_bw server waiting for its client.
ib_write_bw -d rxe0 -x 1 -n 2000 -s 65536 >/tmp/bw_server.out 2>&1 &
bw_server=$!
sleep 1
# shellcheck disable=SC2086
rdmascope profile $COLLECTORS --interval 500ms --duration 120s --output /tmp/prof_bw \
  --pid $bw_server >/tmp/bw.out 2>/tmp/bw.err &
profile=$!
for i in $(seq 100); do grep -q "window open" /tmp/bw.err && break; sleep 0.1; done
client $bw_server ib_write_bw -d rxe0 -x 1 -n 2000 -s 65536 127.0.0.1 >/tmp/bw_client.out
wait $bw_server
wait $profile
echo "@@@EXIT-BW $?"
block bw_summary cat /tmp/bw.out
block bw_log cat /tmp/bw.err
block bw_json cat /tmp/prof_bw/profile.json

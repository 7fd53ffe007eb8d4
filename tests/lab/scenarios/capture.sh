# capture: issue 39's fidelity test on a real soft-RoCE host. While RC traffic runs (an
# ib_write_bw pair for its duration: counters moving; a waiting ibv_rc_pingpong server: a QP,
# CQ, MR held, its CQ's occupancy from the preload library), `rdmascope capture` takes two
# samples 3 s apart, each with the exposition the collectors made from it live
# (samples/NNNN/metrics.prom). Then, with the traffic gone, `serve --replay` scraped twice gives
# those two expositions, series for series (the mr and verbs collectors' included: replayed from
# bpf/*.json, no BPF loaded), and `check --replay` passes.
. /scenarios/lib.sh
# mr and verbs: their probes attach for the capture's window (fentry/fexit on this kernel) and
# each sample keeps their reading (bpf/mr.json): the regions the workload registered before the
# capture started are seeded from restrack, and replay equal.
COLLECTORS="--collector.disable-defaults --collector.rdma --collector.ethtool \
  --collector.resources --collector.host --collector.occupancy --collector.mr --collector.verbs"

# replay_server PORT CAPTURE: serve --replay of CAPTURE on PORT, once ready; its pid in $replay.
replay_server() {
  # shellcheck disable=SC2086
  rdmascope serve --replay "$2" --web.listen-address=:"$1" $COLLECTORS >/tmp/replay_"$1".log 2>&1 &
  replay=$!
  for _ in $(seq 300); do
    wget -q -O /dev/null http://127.0.0.1:"$1"/-/ready 2>/dev/null && return 0
    sleep 0.1
  done
}

# The waiting server runs with the preload library: its CQ's occupancy is in the capture.
LD_PRELOAD=/usr/bin/librdmascope_preload.so ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 512 -p 18700 \
  >/tmp/pp.out 2>&1 &
pingpong=$!
# 45 s: traffic still runs once the capture attached its MR and verbs probes (seconds under
# TCG) and took both samples; it is killed then.
ib_write_bw -d rxe0 -x 1 -D 45 -s 65536 -p 18600 >/tmp/bw.out 2>&1 &
bw_server=$!
sleep 1
ib_write_bw -d rxe0 -x 1 -D 45 -s 65536 -p 18600 127.0.0.1 >/tmp/bw_client.out 2>&1 &
bw_client=$!
sleep 3
# shellcheck disable=SC2086  # word splitting of $COLLECTORS is meant
block capture sh -c "rdmascope capture --output /tmp/cap --samples 2 --interval 3s $COLLECTORS 2>&1; echo \"@@@EXIT \$?\""
kill $pingpong $bw_server $bw_client 2>/dev/null
wait $pingpong $bw_server $bw_client 2>/dev/null
block index cat /tmp/cap/index.json
block live_1 cat /tmp/cap/samples/0001/metrics.prom
block live_2 cat /tmp/cap/samples/0002/metrics.prom

replay_server 9880 /tmp/cap
block replay_1 wget -q -O - http://127.0.0.1:9880/metrics
block replay_2 wget -q -O - http://127.0.0.1:9880/metrics
block replay_3 wget -q -O - http://127.0.0.1:9880/metrics
kill $replay
wait $replay 2>/dev/null
block replay_log cat /tmp/replay_9880.log
# shellcheck disable=SC2086
block check sh -c "rdmascope check --replay /tmp/cap $COLLECTORS 2>&1; echo \"@@@EXIT \$?\""
# doctor: what it found live over the two samples (the capture's doctor.json), and from the
# replay; then the capture and a copy named as another host, as a fleet.
block doctor_live cat /tmp/cap/samples/0002/doctor.json
# shellcheck disable=SC2086
block doctor_replay sh -c "rdmascope doctor --replay /tmp/cap --format json $COLLECTORS 2>/tmp/doctor_replay.log; echo"
block doctor_replay_log cat /tmp/doctor_replay.log
cp -a /tmp/cap /tmp/cap2
sed -i 's/"hostname": "[^"]*"/"hostname": "peer"/' /tmp/cap2/index.json
# shellcheck disable=SC2086
block doctor_fleet sh -c "rdmascope doctor --replay /tmp/cap --replay /tmp/cap2 --format json --show-ok $COLLECTORS 2>/dev/null; echo"

# --redact: the device's GUID and its GIDs appear nowhere in the capture, and it still replays.
# shellcheck disable=SC2086
block redact sh -c "rdmascope capture --output /tmp/capr --samples 1 --redact $COLLECTORS >/tmp/redact.out 2>&1; echo \"@@@EXIT \$?\""
block identifiers sh -c "cat /sys/class/infiniband/rxe0/node_guid; for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do cat \$g; done | grep -v '^0000:0000:0000:0000:0000:0000:0000:0000$' | sort -u"
block redacted_hits sh -c "for v in \$(cat /sys/class/infiniband/rxe0/node_guid) \$(cat /sys/class/infiniband/rxe0/ports/1/gids/* | grep -v '^0000:0000:0000:0000:0000:0000:0000:0000$'); do grep -rlF \"\$v\" /tmp/capr; done; true"
# The same search in the capture made without --redact: it finds them (the search can see).
block unredacted_hits sh -c "for v in \$(cat /sys/class/infiniband/rxe0/node_guid) \$(cat /sys/class/infiniband/rxe0/ports/1/gids/* | grep -v '^0000:0000:0000:0000:0000:0000:0000:0000$'); do grep -rlF \"\$v\" /tmp/cap; done; true"
replay_server 9881 /tmp/capr
block replay_redacted wget -q -O - http://127.0.0.1:9881/metrics
kill $replay
wait $replay 2>/dev/null

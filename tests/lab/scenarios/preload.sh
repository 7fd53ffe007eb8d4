# preload: the preload library in a program that does not link libibverbs and loads a plugin
# linking the real one with dlopen(RTLD_LOCAL) (as Python loads extensions): no crash, counted.
. /scenarios/lib.sh
start_exporter --collector.disable-defaults --collector.occupancy || exit 1
sleep 1000 | LD_PRELOAD=/usr/bin/librdmascope_preload.so plugin_host /usr/bin/libpreload_plugin.so \
  >/tmp/plugin.out 2>&1 &
for i in $(seq 100); do grep -q READY /tmp/plugin.out && break; sleep 0.1; done
block plugin cat /tmp/plugin.out
block scrape scrape
block stats_files ls /run/rdmascope

# ibv_rc_pingpong -s 2048, server and client under the preload library: 2048-byte messages in
# both directions and sampled completion latency (issue #14). A long run, scraped once both
# have timed completions, then stopped: a process's stats file goes when it exits. Message
# sizes are counted only when asked (RDMASCOPE_PRELOAD_MESSAGE_SIZES=1, as `profile` does).
export RDMASCOPE_PRELOAD_SAMPLE=16 RDMASCOPE_PRELOAD_MESSAGE_SIZES=1
LD_PRELOAD=/usr/bin/librdmascope_preload.so ibv_rc_pingpong -d rxe0 -g 1 -n 1000000 -s 2048 \
  >/tmp/pp_server.out 2>&1 &
server=$!
echo "@@@PINGPONG-PID $server"
rm -f /tmp/pp_client.pid
client $server sh -c 'echo $$ >/tmp/pp_client.pid
  export LD_PRELOAD=/usr/bin/librdmascope_preload.so
  exec ibv_rc_pingpong -d rxe0 -g 1 -n 1000000 -s 2048 127.0.0.1' >/tmp/pp_client.out &
pp_client=$!
wait_metric "^rdma_process_completion_latency_seconds_count{pid=\"$server\".*} [1-9]" 60
for i in $(seq 100); do [ -s /tmp/pp_client.pid ] && break; sleep 0.1; done
echo "@@@PINGPONG-CLIENT-PID $(cat /tmp/pp_client.pid)"
wait_metric "^rdma_process_completion_latency_seconds_count{pid=\"$(cat /tmp/pp_client.pid)\".*} [1-9]" 30
block scrape_pingpong scrape
kill $server "$(cat /tmp/pp_client.pid)" 2>/dev/null
wait $pp_client 2>/dev/null
wait $server 2>/dev/null
block pingpong_server cat /tmp/pp_server.out

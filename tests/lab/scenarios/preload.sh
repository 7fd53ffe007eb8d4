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

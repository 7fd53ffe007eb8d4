# text_poke (issue 27): the soft lockup seen while the kernel MR path attached, without BPF.
# mr_churn loops ibv_reg_mr/ibv_dereg_mr while the function tracer is switched on and off on
# the same two functions the kernel path hooks (ftrace patches their entries with the same
# int3-based text_poke_bp() as BPF trampolines). No rdmascope runs. If mr_churn then sticks
# at ib_dereg_mr_user+0 as it did under the exporter, the lockup is the emulated CPU's
# handling of live code patching, not the exporter's programs.
# rdmascope.toggles=N (run_scenario.py --append): how many on/off switches (default 200).
. /scenarios/lib.sh
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
T=/sys/kernel/tracing
TOGGLES=$(sed -n 's/.*rdmascope\.toggles=\([0-9][0-9]*\).*/\1/p' /proc/cmdline)
TOGGLES=${TOGGLES:-200}
dmesg -c >/dev/null
rm -f /tmp/churn.stop /tmp/churn.ready
mr_churn rxe0 1 25 8192 /tmp/churn.stop /tmp/churn.ready >/tmp/churn.out 2>&1 &
churner=$!
sleep 0.5
n=1
while [ "$n" -le "$TOGGLES" ]; do
  printf 'ib_dereg_mr_user\nib_uverbs_reg_mr\n' >$T/set_ftrace_filter
  echo function >$T/current_tracer
  echo nop >$T/current_tracer
  # A lockup shows in the kernel log within ~25 s: stop early, the log tells.
  if [ $((n % 20)) = 0 ] && dmesg | grep -q "soft lockup"; then break; fi
  n=$((n + 1))
done
echo "@@@TOGGLES $((n - 1))"
touch /tmp/churn.stop
wait_file /tmp/churn.ready 30 && echo "@@@CHURNER held"
block kernel_log dmesg
kill $churner 2>/dev/null

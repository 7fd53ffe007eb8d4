#!/usr/bin/env bash
# Wrong flags give a clear message and a non-zero exit, never a crash or a silent start.
set -u
bin=$1
fail=0
expect_error() {  # expect_error "<text in stderr>" args...
  local want=$1; shift
  local out rc
  out=$(timeout 10 "$bin" "$@" 2>&1); rc=$?
  if [[ $rc -eq 0 || $rc -ge 124 ]] || ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: rdmascope $* -> rc=$rc, wanted '$want', got: $out"; fail=1
  else
    echo "ok: rdmascope $* -> $(head -1 <<<"$out")"
  fi
}
expect_error "A subcommand is required"
expect_error "The following argument was not expected" serve --bogus
expect_error "invalid regular expression" serve --collector.ethtool.device-include='('
expect_error "invalid port" serve --web.listen-address=:99999
expect_error "must be [host]:port" serve --web.listen-address=9879
expect_error "not a directory" serve --path.sysfs=/nonexistent
expect_error "log.level" serve --log.level=loud
expect_error "queue-stats" serve --collector.ethtool.queue-stats=maybe
expect_error "telemetry-path" serve --web.telemetry-path=metrics
expect_error "not a duration" serve --collector.mr.leak-age=10x
expect_error "configured twice" serve --collector.perf.event=cycles --collector.perf.event='{instructions,cycles}'
expect_error "unclosed group" serve --collector.perf.event='{cycles,instructions'
# --probe.strict: a probe set that cannot attach stops the start, with the reason.
expect_error "--probe.strict: the mr probes did not attach" check --collector.disable-defaults \
  --collector.mr --probe.strict --probe.library=/etc/hostname
# check: one collection, a table, exit 0 when nothing failed (no data is not a failure).
empty=$(mktemp -d)
out=$("$bin" check --collector.disable-defaults --collector.rdma --path.sysfs="$empty" 2>/dev/null)
rc=$?
rmdir "$empty"
if [[ $rc -eq 0 ]] && grep -qE '^rdma +no data +0 ' <<<"$out"; then
  echo "ok: check -> $(tail -1 <<<"$out")"
else
  echo "FAIL: check -> rc=$rc: $out"; fail=1
fi
# check's one pass reads the modules in it: the link collector's state is this host's answer
# (its interfaces have no module to read here), not "first reading under way".
out=$("$bin" check --collector.disable-defaults --collector.link 2>/dev/null)
rc=$?
if [[ $rc -eq 0 ]] && grep -qE '^link ' <<<"$out" && ! grep -q 'under way' <<<"$out"; then
  echo "ok: check link -> $(grep -E '^link ' <<<"$out")"
else
  echo "FAIL: check link -> rc=$rc: $out"; fail=1
fi
# A port already taken: a one-line fatal error, exit 1.
python3 - "$bin" <<'PY' || fail=1
import socket, subprocess, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); port = s.getsockname()[1]
p = subprocess.run([sys.argv[1], "serve", f"--web.listen-address=127.0.0.1:{port}"],
                   capture_output=True, text=True, timeout=10)
ok = p.returncode == 1 and "cannot listen" in p.stderr
print(("ok" if ok else "FAIL") + ": port in use -> rc=%d %s" % (p.returncode, p.stderr.strip()[-200:]))
sys.exit(0 if ok else 1)
PY
out=$("$bin" --version) && grep -q '^rdmascope ' <<<"$out" && echo "ok: --version: $out" || { echo "FAIL: --version"; fail=1; }
"$bin" serve --help | grep -qF -- '--[no-]collector.ethtool' && echo "ok: serve --help" || { echo "FAIL: serve --help"; fail=1; }
# A first-release spelling still works for one release, with one warning naming the new flag.
expect_error "use the new name" serve --mr.leak-age=10x
out=$("$bin" check --collector.disable-defaults --collector.perf --perf.event=cpu-clock 2>&1 >/dev/null)
if grep -qF 'flag=--perf.event new=--collector.perf.event' <<<"$out"; then
  echo "ok: deprecated --perf.event -> $(grep -F deprecated <<<"$out")"
else
  echo "FAIL: deprecated --perf.event: $out"; fail=1
fi
exit $fail

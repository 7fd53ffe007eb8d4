#!/bin/sh
# help2man's "program": `help-all.sh BINARY --help` prints the top-level help followed by every
# subcommand's, so that rdmascope(1) documents each subcommand's flags; --version passes through.
# `check` and `doctor` take serve's flags too: after serve, only the flags a subcommand adds
# are printed, so that the page lists each flag once.
set -eu
bin=$1
shift
case "${1:-}" in
  --version) exec "$bin" --version ;;
  --help) ;;
  *) echo "usage: $0 BINARY --help|--version" >&2; exit 2 ;;
esac
"$bin" --help
serve_flags=$("$bin" serve --help | sed -n 's/^  \(-[^ ,=]*\).*/\1/p' | tr '\n' ' ')
# The subcommands are the indented words under "Subcommands:" (CLI11's layout).
for sub in $("$bin" --help | sed -n '/^Subcommands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p'); do
  printf '\n'
  "$bin" "$sub" --help | sed "1s/^/$sub: /" | awk -v name="$sub" -v known=" $serve_flags " '
    # An option block is its "  --flag" line and the deeper-indented lines under it; a section
    # heading ("Web:") is printed only if one of its options is.
    NR <= 2 { print; next }
    /^$/ { next }
    /^[^ ]/ { heading = $0; next }
    /^  -/ { split($1, f, /[,=]/)
             keep = f[1] != "-h" && (name == "serve" || index(known, " " f[1] " ") == 0)
             if (keep && heading != "") { print ""; print heading; heading = "" } }
    keep { print }'
done

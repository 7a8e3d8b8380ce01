#!/usr/bin/env bash
# A lean CLI start (bench/RESULTS.md, "A lean CLI start"): every client command pays corral's
# start-up, so the binary must load nothing but libc and libm (and the loader itself). A new shared dependency (a
# library linked as .so instead of its archive or headers) fails here, not silently in the
# benchmarks. Also: `corral SUBCOMMAND` registers only that subcommand's options (tools/main.cc),
# so each subcommand's --help must still work on its own and the top-level help list them all.
# Usage: tests/lean_start_test.sh PATH/TO/corral
set -euo pipefail
corral="$1"
needed=$(readelf -d "$corral" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
[ "$needed" = "ld-linux-x86-64.so.2 libc.so.6 libm.so.6 " ] || [ "$needed" = "libc.so.6 libm.so.6 " ] || { echo "FAIL: corral loads: $needed(expected only libc.so.6 libm.so.6)"; exit 1; }
for sub in serve exec read write ls status call scope poll stop worker mcp; do
  "$corral" --help | grep -q "^  $sub " || { echo "FAIL: corral --help does not list $sub"; exit 1; }
  "$corral" "$sub" --help > /dev/null || { echo "FAIL: corral $sub --help failed"; exit 1; }
done
echo "ok: corral loads only $needed; every subcommand's help works alone"

#!/usr/bin/env bash
# tools/run.sh starts a supervisor that the client command it prints reaches.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
scratch=$(mktemp -d /tmp/corral-run-sh-XXXXXX)
export CORRAL_SOCKET="$scratch/corral.sock"
"$root/tools/run.sh" > "$scratch/out" 2> "$scratch/err" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$scratch"' EXIT
for _ in $(seq 1 600); do
  [ -S "$CORRAL_SOCKET" ] && break
  kill -0 $pid 2>/dev/null || { cat "$scratch/out" "$scratch/err"; echo "FAIL: run.sh exited"; exit 1; }
  sleep 0.1
done
grep -q "starting on $CORRAL_SOCKET" "$scratch/out" || { cat "$scratch/out"; echo "FAIL: no socket path printed"; exit 1; }
cmd=$(grep -m1 -- "exec -- echo hi" "$scratch/out" | sed 's/^ *//')
[ -n "$cmd" ] || { cat "$scratch/out"; echo "FAIL: no client command printed"; exit 1; }
out=$(eval "$cmd")
[ "$out" = "hi" ] || { echo "FAIL: '$cmd' printed '$out'"; exit 1; }
# run.sh builds only the corral target: that must include the shipped Python worker.
makefile="$root/build/CMakeFiles/Makefile2"
if [ -f "$makefile" ]; then
  grep -q "^tools/CMakeFiles/corral.dir/all: worker_proto/CMakeFiles/corral_python_proto.dir/all" "$makefile" ||
    { echo "FAIL: the corral target does not build the Python worker (corral_python_proto)"; exit 1; }
else
  echo "note: $makefile absent (not a Makefile build): the target dependency is checked by the worker below only"
fi
corral="$root/build/tools/corral"
"$corral" worker start runsh --python >/dev/null || { echo "FAIL: the Python worker does not start"; exit 1; }
got=$("$corral" worker eval runsh --request '{"code": "1 + 1"}')
case "$got" in *'"result": "2"'*) ;; *) echo "FAIL: worker eval printed '$got'"; exit 1 ;; esac
"$corral" worker stop runsh >/dev/null
echo "ok: tools/run.sh served '$cmd' and a Python worker"

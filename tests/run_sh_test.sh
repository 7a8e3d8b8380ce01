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
echo "ok: tools/run.sh served '$cmd'"

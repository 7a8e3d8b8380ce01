#!/usr/bin/env bash
# A Release build's corral serves: one command through its own supervisor.
# Usage: tests/release_smoke.sh PATH/TO/corral
set -euo pipefail
corral="$1"
scratch=$(mktemp -d /tmp/corral-release-XXXXXX)
"$corral" serve --socket "$scratch/sock/corral.sock" --temp-root "$scratch" 2> "$scratch/serve.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$scratch"' EXIT
for _ in $(seq 1 200); do
  [ -S "$scratch/sock/corral.sock" ] && break
  kill -0 $pid 2>/dev/null || { cat "$scratch/serve.log"; echo "FAIL: the Release supervisor exited"; exit 1; }
  sleep 0.1
done
out=$("$corral" exec --socket "$scratch/sock/corral.sock" --env A=release -- sh -c 'echo "$A"')
[ "$out" = "release" ] || { cat "$scratch/serve.log"; echo "FAIL: the Release build printed '$out'"; exit 1; }
echo "ok: a Release build of corral ran a command"

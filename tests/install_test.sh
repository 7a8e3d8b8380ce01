#!/usr/bin/env bash
# `cmake --install` gives a corral that runs anywhere: installed into a temp prefix, moved to
# another directory, with the build tree's and the source tree's Python files hidden, it still
# runs a Python evaluation (docs/design.md "Installed layout").
# Usage: tests/install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1"
source="$2"
if [ "$(id -u)" -ne 0 ]; then
  # Hiding the build tree's files needs a private mount namespace (CAP_SYS_ADMIN).
  echo "skipped: hiding the build tree's Python files needs root (running as uid $(id -u))"
  exit 0
fi
scratch=$(mktemp -d /tmp/corral-install-XXXXXX)
chmod 0755 "$scratch"  # the sandbox uid reads the installed Python files
trap 'rm -rf "$scratch"' EXIT

cmake --install "$build" --prefix "$scratch/first" > "$scratch/install.log"
mv "$scratch/first" "$scratch/moved"  # nothing may depend on where it was installed
prefix="$scratch/moved"
for f in bin/corral share/corral/python/corral_eval_worker.py share/corral/python/corral_worker.py \
         share/corral/python/corral_client/__init__.py share/corral/python/example_client.py \
         share/corral/python/corral/proto/Message.py share/doc/corral/README.md share/doc/corral/design.md \
         share/doc/corral/threat-model.md share/doc/corral/protocol.md; do
  [ -f "$prefix/$f" ] || { cat "$scratch/install.log"; echo "FAIL: $f was not installed"; exit 1; }
done

# In a private mount namespace, the build tree's and the source tree's Python files are empty
# mode-000 directories: the installed corral can only be using its own.
export prefix scratch build source
unshare --mount --propagation private bash -euo pipefail -c '
  mount -t tmpfs -o mode=000,size=4k none "$build/share/corral/python"
  mount -t tmpfs -o mode=000,size=4k none "$source/worker_proto/python"
  ! ls "$build/share/corral/python/corral_eval_worker.py" 2>/dev/null
  sock="$scratch/sock/corral.sock"
  "$prefix/bin/corral" serve --socket "$sock" --temp-root "$scratch" 2> "$scratch/serve.log" &
  pid=$!
  trap "kill $pid 2>/dev/null; wait $pid 2>/dev/null || true" EXIT
  for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.1; done
  "$prefix/bin/corral" worker start --socket "$sock" py --python > /dev/null 2>&1
  out=$("$prefix/bin/corral" worker eval --socket "$sock" py --request "{\"code\": \"import corral_worker, os; (6 * 7, os.path.dirname(corral_worker.__file__))\"}")
  expected="{\"ok\": true, \"stdout\": \"\", \"stderr\": \"\", \"result\": \"(42, '"'"'$prefix/share/corral/python'"'"')\", \"error\": null}"
  if [ "$out" != "$expected" ]; then
    cat "$scratch/serve.log"
    echo "FAIL: the installed corral evaluated to: $out"
    echo "      expected: $expected"
    exit 1
  fi
  # The build tree'"'"'s own corral, whose Python files are hidden, says so instead of guessing.
  "$build/tools/corral" serve --socket "$scratch/sock2/corral.sock" --temp-root "$scratch" 2> "$scratch/serve2.log" &
  pid2=$!
  trap "kill $pid $pid2 2>/dev/null; wait $pid $pid2 2>/dev/null || true" EXIT
  for _ in $(seq 1 200); do [ -S "$scratch/sock2/corral.sock" ] && break; sleep 0.1; done
  if err=$("$build/tools/corral" worker start --socket "$scratch/sock2/corral.sock" py --python 2>&1); then
    echo "FAIL: the build tree'"'"'s corral started a Python worker without its Python files"; exit 1
  fi
  case "$err" in
    *"the shipped Python worker is not installed: no $build/share/corral/python/corral_eval_worker.py"*) ;;
    *) echo "FAIL: worker start --python without the files said: $err"; exit 1 ;;
  esac
'
# The Python client imports from the installed directory alone (its generated package beside it).
/usr/bin/python3 -I -c 'import sys; sys.path.insert(0, sys.argv[1]); import corral_client, corral.proto
assert corral_client.__file__.startswith(sys.argv[1] + "/"), corral_client.__file__' "$prefix/share/corral/python"
echo "ok: an installed, moved corral ran a Python evaluation with its own Python files"
echo "ok: the installed Python client imports"

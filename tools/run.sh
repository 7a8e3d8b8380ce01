#!/usr/bin/env bash
# Sets up (if needed), builds and starts the corral supervisor in the foreground.
# Extra arguments go to `corral serve` (see `build/tools/corral serve --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh corral
bin="$PWD/build/tools/corral"
# The default path, computed the way the binary does (docs/protocol.md "Transport").
if [ -n "${CORRAL_SOCKET:-}" ]; then socket="$CORRAL_SOCKET"
elif [ -n "${XDG_RUNTIME_DIR:-}" ]; then socket="$XDG_RUNTIME_DIR/corral/corral.sock"
elif [ "$(id -u)" -eq 0 ]; then socket=/run/corral/corral.sock
else socket="/tmp/corral-$(id -u)/corral.sock"; fi
cat <<MSG
corral supervisor starting on $socket (Ctrl-C stops it).
In another terminal:
  $bin exec -- echo hi
  $bin status
MSG
exec "$bin" serve "$@"

#!/usr/bin/env bash
# Installs exactly the Debian packages corral needs to build and test, and nothing
# that is already there. Idempotent: a second run installs nothing. --bench adds the npm peers
# of bench/peers.sh.
set -euo pipefail

packages=(
  build-essential cmake pkg-config ccache
  libasio-dev                         # standalone Asio (1.22 on Debian 12)
  libflatbuffers-dev flatbuffers-compiler
  python3-flatbuffers                 # Python runtime for worker_proto/python (the Python worker
                                      # SDK); Debian's, so it is visible to /usr/bin/python3 only:
                                      # run workers with /usr/bin/python3, not a pyenv python3 on PATH
  libspdlog-dev libfmt-dev
  libcli11-dev                        # command line parsing
  nlohmann-json3-dev                  # the JSON corral writes (--json, audit log, authorization)
  python3-pytest                      # the Python client's tests (/usr/bin/python3 -m pytest)
  nodejs                              # (and its npm) the MCP test drives `corral mcp` with the official SDK
  doctest-dev libbenchmark-dev
  libseccomp-dev
  clang libclang-rt-14-dev            # libFuzzer target for the frame decoder
  iproute2 procps                     # tests inspect processes and loopback
  bubblewrap                          # the benchmark compares against bwrap (bench only)
  hyperfine                           # whole-process timings of the CLI (bench only)
  ripgrep socat                       # srt (sandbox-runtime) needs both to run (bench/peers.sh only)
  uidmap                              # newgidmap: a non-root supervisor's sandboxes drop their
                                      # supplementary groups (needs a range in /etc/subgid)
)

# Debian's own nodejs ships npm separately; NodeSource's bundles it (and conflicts with it).
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Test-only npm packages, pinned by tests/npm/package.json and its committed lockfile, go into
# tests/npm/node_modules (ignored by git); with --bench also bench/npm, the sandboxing peers
# that bench/peers.sh times corral against (about 430 MB, which no test needs: tools/test.sh and
# CI run setup.sh without it). `npm ci` installs exactly the lockfile; it runs only when the
# lockfile changed since the last install.
npm_subs=(tests/npm)
if [ "${1:-}" = --bench ]; then
  npm_subs+=(bench/npm)
else
  echo "setup: bench/npm (bench/peers.sh's peers) not installed: run tools/setup.sh --bench for it"
fi
for npm_sub in "${npm_subs[@]}"; do
  npm_dir="$(cd "$(dirname "$0")/.." && pwd)/$npm_sub"
  [ -f "$npm_dir/package-lock.json" ] || continue
  stamp="$npm_dir/node_modules/.corral-lock"
  if ! cmp -s "$npm_dir/package-lock.json" "$stamp" 2>/dev/null; then
    echo "setup: npm ci in $npm_sub"
    (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error)
    cp "$npm_dir/package-lock.json" "$stamp"
  else
    echo "setup: $npm_sub packages present"
  fi
done

#!/usr/bin/env bash
# Sets up (if needed), builds, and runs every test: the doctest suites through ctest and the
# soak (label `soak`, bounded by CORRAL_SOAK_SCALE, default 0.1); a Release build
# (build-release/) with a smoke run; the suites and the soak again, built with
# AddressSanitizer and UndefinedBehaviorSanitizer in their own build tree (build-asan/); then
# a short libFuzzer run of the frame decoder (clang, build-fuzz/).
# After each ctest run, no corral-<pid> cgroup and no /tmp/corral-<pid>-* dir of a process
# that is gone may be new: tests clean up after themselves.
#   CORRAL_ASAN=0 skips the sanitizer build; CORRAL_FUZZ_SECONDS (default 20) bounds the fuzz
#   run, 0 skips it; CORRAL_JOBS (default 2) is the build parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${CORRAL_JOBS:-2}"

# Every corral-<pid> cgroup and /tmp/corral-<pid>-* dir.
corral_dirs() {
  {
    find /sys/fs/cgroup -maxdepth 8 -type d -name 'corral-*' 2>/dev/null || true
    find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'corral-[0-9]*-*' 2>/dev/null || true
  } | sort
}

# Those whose process is gone (the ones a test run could have leaked; those of a live
# supervisor are its own business).
leftovers() {
  corral_dirs | while read -r path; do
    pid=$(basename "$path" | sed -E 's/^corral-([0-9]+).*/\1/')
    # An if, not a bare &&: a last path of a live process must not end the loop (and, with
    # set -e and pipefail, this script) with status 1.
    if [[ "$pid" =~ ^[0-9]+$ ]] && [ ! -e "/proc/$pid" ]; then echo "$path"; fi
  done
}

# Runs ctest in build tree $1, then the soak, and fails if the run left something behind. "Before" is every
# such dir, live owner or not: one that existed before the run, whose owner (another
# supervisor on this host, or an unrelated process that reused a dead pid) went away during
# the run, was not left by this run.
run_suite() {
  local tree="$1" before after leaked
  before=$(corral_dirs)
  (cd "$tree" && ctest --output-on-failure --timeout "${CORRAL_TEST_TIMEOUT:-900}" -LE soak)
  # The soak on its own, bounded: CORRAL_SOAK_SCALE=1 is the full count (README.md "Quick start").
  (cd "$tree" && CORRAL_SOAK_SCALE="${CORRAL_SOAK_SCALE:-0.1}" ctest --output-on-failure --timeout 1800 -L soak)
  after=$(leftovers)
  leaked=$(comm -13 <(echo "$before") <(echo "$after") | sed '/^$/d')
  if [ -n "$leaked" ]; then
    echo "FAIL: the tests in $tree left these behind:"
    echo "$leaked"
    exit 1
  fi
  echo "$tree: no cgroup or temp dir left behind"
}

tools/build.sh
run_suite build

# A packager's build: Release (-O3, where GCC has warned when -O2 did not), warnings as errors
# here, of the binary and the programs the tests run; then the Release binary serves a command.
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DCORRAL_WERROR=ON -DCORRAL_BUILD_BENCH=OFF >/dev/null
cmake --build build-release -j"$jobs" --target corral corral_test_helper corral_echo_worker
tests/release_smoke.sh build-release/tools/corral

if [ "${CORRAL_ASAN:-1}" != 0 ]; then
  # The code between clone and exec and the sandbox's init stay uninstrumented (see
  # runtime/CMakeLists.txt). LeakSanitizer checks the supervisor, the CLI and the test
  # programs; programs that run inside a sandbox cannot be checked for leaks (no ptrace there).
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCORRAL_SANITIZE=ON -DCORRAL_BUILD_BENCH=OFF \
    -DCORRAL_WERROR=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  # No detect_leaks here: it is on by default, and an ASAN_OPTIONS setting would override
  # the detect_leaks=0 that the programs run inside sandboxes compile in.
  export ASAN_OPTIONS="abort_on_error=0:print_summary=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  run_suite build-asan
  unset ASAN_OPTIONS UBSAN_OPTIONS
fi

fuzz_seconds="${CORRAL_FUZZ_SECONDS:-20}"
if [ "$fuzz_seconds" -gt 0 ]; then
  cmake -S . -B build-fuzz -DCORRAL_FUZZ=ON -DCORRAL_WERROR=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build-fuzz -j"$jobs"
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  # New inputs go to the scratch dir; the saved corpus is read, never rewritten.
  build-fuzz/tests/fuzz/frame_fuzzer -max_total_time="$fuzz_seconds" -print_final_stats=1 \
    "$scratch" tests/fuzz/corpus 2>&1 | tail -n 5
  echo "fuzz: frame decoder ran ${fuzz_seconds}s without a crash"
fi

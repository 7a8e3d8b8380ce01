#!/usr/bin/env bash
# Sets up (if needed), builds, and runs every test: the doctest suites through ctest, the soak
# (label `soak`, bounded by CORRAL_SOAK_SCALE, default 0.1), a
# Release build (build-release/) with a smoke run, then a short libFuzzer run of the frame
# decoder (clang, its own build tree, build-fuzz/).
# CORRAL_FUZZ_SECONDS (default 20) bounds the fuzz run; 0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh
(cd build && ctest --output-on-failure --timeout 600 -LE soak)
# The soak on its own, bounded: CORRAL_SOAK_SCALE=1 is the full count (README.md "Quick start").
(cd build && CORRAL_SOAK_SCALE="${CORRAL_SOAK_SCALE:-0.1}" ctest --output-on-failure --timeout 1800 -L soak)

# A packager's build: Release (-O3, where GCC has warned when -O2 did not), warnings as errors
# here, of the binary and the programs the tests run; then the Release binary serves a command.
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DCORRAL_WERROR=ON -DCORRAL_BUILD_BENCH=OFF >/dev/null
cmake --build build-release -j"${CORRAL_JOBS:-2}" --target corral corral_test_helper corral_echo_worker
tests/release_smoke.sh build-release/tools/corral

fuzz_seconds="${CORRAL_FUZZ_SECONDS:-20}"
if [ "$fuzz_seconds" -gt 0 ]; then
  cmake -S . -B build-fuzz -DCORRAL_FUZZ=ON -DCORRAL_WERROR=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build-fuzz -j"${CORRAL_JOBS:-2}"
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  # New inputs go to the scratch dir; the saved corpus is read, never rewritten.
  build-fuzz/tests/fuzz/frame_fuzzer -max_total_time="$fuzz_seconds" -print_final_stats=1 \
    "$scratch" tests/fuzz/corpus 2>&1 | tail -n 5
  echo "fuzz: frame decoder ran ${fuzz_seconds}s without a crash"
fi

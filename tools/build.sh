#!/usr/bin/env bash
# Configures and builds corral into build/ (RelWithDebInfo, warnings as errors, ccache when
# present, -j2).
# Usage: tools/build.sh [TARGET...]   (default: everything)
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCORRAL_WERROR=ON >/dev/null
if [ $# -eq 0 ]; then
  cmake --build build -j"${CORRAL_JOBS:-2}"
else
  cmake --build build -j"${CORRAL_JOBS:-2}" --target "$@"
fi

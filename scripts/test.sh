#!/bin/sh
# Installs what is needed, builds memtrack and runs every test.
# The options are given explicitly: build/ may hold the demo's cache (tests off).
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMTRACK_TESTS=ON -DMEMTRACK_BENCHMARKS=ON
cmake --build build -j"$(nproc)"
# A run that finds no test fails: it would otherwise pass without testing anything.
# Tests run in parallel; the recorder tests one at a time (a RESOURCE_LOCK,
# tests/CMakeLists.txt).
ctest --test-dir build --output-on-failure --no-tests=error -j"$(nproc)" --timeout 300

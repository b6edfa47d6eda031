#!/bin/sh
# Installs what is needed, builds memtrack, records the bundled demo program
# and prints the report.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMTRACK_TESTS=OFF -DMEMTRACK_BENCHMARKS=OFF
cmake --build build -j"$(nproc)" --target memtrack memtrack_demo
build/src/cli/memtrack record -o build/demo.zst -- build/demo/memtrack_demo
build/src/cli/memtrack report --top 5 build/demo.zst
build/src/cli/memtrack report --format html -o build/demo.html build/demo.zst
echo "The same report as a page (flame graph, tables): $(pwd)/build/demo.html"

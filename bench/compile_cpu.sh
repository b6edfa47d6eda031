#!/bin/bash
# A compiler launcher that appends the CPU time of each compile to a log:
# "user_s sys_s wall_s OUTPUT" (CPU time, unlike wall time, barely moves with
# other load on the machine). Used for the CI-time figures of
# docs/BENCHMARKS.md:
#   cmake -S . -B build-timed -DCMAKE_CXX_COMPILER_LAUNCHER=$PWD/bench/compile_cpu.sh \
#         -DCMAKE_C_COMPILER_LAUNCHER=$PWD/bench/compile_cpu.sh [options of the build to time]
#   COMPILE_CPU_LOG=/tmp/tu.log cmake --build build-timed -j2
#   sort -rn /tmp/tu.log | head -20          # the most expensive sources
#   awk '{s += $1 + $2} END {print s}' /tmp/tu.log   # CPU seconds in all
out=?
prev=
for arg in "$@"; do
  [ "$prev" = "-o" ] && out=$arg
  prev=$arg
done
exec /usr/bin/time -a -o "${COMPILE_CPU_LOG:-/tmp/compile_cpu.log}" -f "%U %S %e $out" "$@"

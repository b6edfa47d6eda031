# Shared by the whole-program benchmark scripts (sourced, not run):
# `memtrack` and `loop` point into the build directory given as $1 (default
# build), `tmp` is a scratch directory removed on exit, median() reads
# numbers on stdin.
build=${1:-build}
memtrack=$build/src/cli/memtrack
loop=$build/bench/malloc_loop
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# Shared by the whole-program benchmark scripts (sourced, not run):
# `memtrack` and `loop` point into the build directory given as $1 (default
# build), `tmp` is a scratch directory removed on exit, median() reads
# numbers on stdin, figure FILE KEY prints a number of `memtrack info --format
# json`, and `here` is bench/, which holds the workloads of the real-program
# runs (work.sql for sqlite3, work.py for python3).
build=${1:-build}
memtrack=$build/src/cli/memtrack
loop=$build/bench/malloc_loop
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
figure() { awk -F': ' -v key="\"$2\"" '$1 ~ key {gsub(/[ ,]/, "", $2); print $2; exit}' "$1"; }

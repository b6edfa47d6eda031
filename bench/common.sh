# Shared by the whole-program benchmark scripts (sourced, not run):
# `memtrack` and `loop` point into the build directory given as $1 (default
# build), `tmp` is a scratch directory removed on exit, median() reads
# numbers on stdin, figure FILE KEY prints a number of `memtrack info --format
# json`, and `here` is bench/, which holds the workloads of the real-program
# runs (work.sql for sqlite3, work.py for python3, work.cpp for g++).
build=${1:-build}
memtrack=$build/src/cli/memtrack
loop=$build/bench/malloc_loop
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
# BEFORE=DIR, for the scripts that compare two builds: `before` is DIR's
# memtrack (DIR/src/cli/memtrack, or a directory holding memtrack and its
# libmemtrack-interpose.so), `before_fast` the flag it needs for the fast path
# (builds from before the fast path became the default asked for it).
before=""
before_fast=""
if [ -n "${BEFORE:-}" ]; then
  before=$BEFORE/src/cli/memtrack
  [ -x "$before" ] || before=$BEFORE/memtrack
  if "$before" record --help | grep -q -- --fast-path; then before_fast=--fast-path; fi
fi
figure() { awk -F': ' -v key="\"$2\"" '$1 ~ key {gsub(/[ ,]/, "", $2); print $2; exit}' "$1"; }

# The whole-program runs of bench/fast_path.sh and fast_path_stacks.sh.
# timed LABEL OUTFILE COMMAND...: runs COMMAND, appends "wall cpu" seconds
# (wall until COMMAND exits; the CPU time of everything it started, also of
# memtrack's recorder, which releases the kernel's probes after memtrack has
# exited: bench/timed_run.py) to OUTFILE.
timed() {
  label=$1; out=$2; shift 2
  /usr/bin/python3 "$here/timed_run.py" "$tmp/time" "$@" >/dev/null 2>"$tmp/stderr" </dev/null || {
    echo "$label failed:"; cat "$tmp/stderr"; }
  awk '{printf "%s %.3f\n", $1, $2 + $3}' "$tmp/time" >>"$out"
}
# run_program PROGRAM MODE [PREFIX...]: timed run of the workload PROGRAM
# (python: python3 with PYTHONMALLOC=malloc, sqlite: sqlite3, gxx: a g++ -O1
# compile of bench/work.cpp) behind PREFIX (a recorder and its flags, ending
# in --), appended to $tmp/PROGRAM.MODE.
run_program() {
  program=$1; mode=$2; shift 2
  case $program in
    # The variable is set for the recorder, not by `env` behind it: heaptrack
    # traces only the process it starts (behind `env` it measured env alone).
    python) set -- env PYTHONMALLOC=malloc "$@" /usr/bin/python3 "$here/work.py" ;;
    sqlite) set -- "$@" sqlite3 :memory: -init "$here/work.sql" .quit ;;
    gxx) set -- "$@" g++ -O1 -c "$here/work.cpp" -o "$tmp/work.o" ;;
    *) echo "unknown program $program" >&2; exit 2 ;;
  esac
  timed "$program $mode" "$tmp/$program.$mode" "$@"
}
# program_summary PROGRAM MODE...: median wall and CPU of each mode's runs,
# with the slowdown against the mode `untraced`.
program_summary() {
  program=$1; shift
  w0=$(awk '{print $1}' "$tmp/$program.untraced" | median); c0=$(awk '{print $2}' "$tmp/$program.untraced" | median)
  for mode in "$@"; do
    w=$(awk '{print $1}' "$tmp/$program.$mode" | median); c=$(awk '{print $2}' "$tmp/$program.$mode" | median)
    awk -v p="$program" -v m="$mode" -v w="$w" -v c="$c" -v w0="$w0" -v c0="$c0" 'BEGIN {
      printf "  %-7s %-10s wall %6.2f s (%5.1fx)  CPU %6.2f s (%5.1fx)\n", p, m, w, w / w0, c, c / c0 }'
  done
}
# info_counter NAME: a trailer counter of the last recording ($tmp/a.zst).
info_counter() { "$memtrack" info "$tmp/a.zst" | awk -v key="  $1:" 'index($0, key) == 1 {print $2}'; }

# The benchmarks of bench/service.py (service_attach.sh, snapshots.sh,
# aggregate_size.sh): now, the time in seconds; built, the dicts the service
# has built (its counter file, $tmp/counter); cpu, its CPU seconds
# ($service's); wait_for FILE TEXT, until FILE holds TEXT (30 s at most).
now() { date +%s.%N; }
built() { od -An -t u8 -N 8 "$tmp/counter" | tr -d ' '; }
cpu() { awk -v hz="$(getconf CLK_TCK)" '{sub(/.*\) /, ""); print ($12 + $13) / hz}' "/proc/$service/stat"; }
wait_for() { i=0; until grep -q "$2" "$1" 2>/dev/null; do i=$((i + 1)); [ $i -lt 3000 ] || { cat "$1"; exit 1; }; sleep 0.01; done; }

#!/bin/sh
# What call paths (on by default) cost on both recording paths: python3
# (PYTHONMALLOC=malloc bench/work.py) and sqlite3 (bench/work.sql) untraced,
# recorded by the fast path and by the uprobes, each with call paths (the
# default) and with --no-stacks, and heaptrack (which records call paths),
# interleaved. Medians of ROUNDS runs: wall and CPU s of everything the run
# started, slowdown against untraced; the artifact's size.
# Usage: bench/call_paths_default.sh [BUILD_DIR] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
rounds=${2:-5}
modes="untraced fast fast-no-stacks uprobes uprobes-no-stacks heaptrack"
for _ in $(seq "$rounds"); do
  for program in python sqlite; do
    run_program "$program" untraced
    run_program "$program" fast "$memtrack" record -q -o "$tmp/fast.zst" --
    run_program "$program" fast-no-stacks "$memtrack" record -q --no-stacks -o "$tmp/fast-no-stacks.zst" --
    run_program "$program" uprobes "$memtrack" record -q --uprobes -o "$tmp/uprobes.zst" --
    run_program "$program" uprobes-no-stacks "$memtrack" record -q --uprobes --no-stacks -o "$tmp/uprobes-no-stacks.zst" --
    run_program "$program" heaptrack heaptrack -o "$tmp/ht.$program"
    for mode in fast fast-no-stacks uprobes uprobes-no-stacks; do
      stat -c %s "$tmp/$mode.zst" >>"$tmp/$program.$mode.bytes"
    done
    stat -c %s "$tmp"/ht."$program"* >>"$tmp/$program.heaptrack.bytes"
    rm -f "$tmp"/ht.*
  done
done
echo "median wall s / CPU s of the run (slowdown vs untraced) and artifact bytes, $rounds interleaved runs"
for program in python sqlite; do
  program_summary "$program" $modes
  for mode in fast fast-no-stacks uprobes uprobes-no-stacks heaptrack; do
    echo "  $program $mode artifact: $(median <"$tmp/$program.$mode.bytes") bytes"
  done
done

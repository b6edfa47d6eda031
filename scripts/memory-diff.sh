#!/bin/sh
# The CI recipe of docs/REPORT.md ("In CI"): records a benchmark built from
# the base and from the head, compares the runs with `memtrack diff`, writes
# the markdown summary (and appends it to the GitHub job summary when there
# is one) and exits with the diff's status: 0 every budget held, 4 a budget
# broke, 1 a damaged recording, 2 or 3 an error.
#
#   scripts/memory-diff.sh BASE_PROGRAM HEAD_PROGRAM [memtrack diff options...]
#
# Environment: BENCH_ARGS the benchmark's arguments and RECORD_OPTIONS more
# options of `memtrack record` (--classic-uprobes on kernels before 6.13),
# both split on spaces; MEMTRACK the memtrack binary (default: memtrack on
# the PATH); OUT_DIR where base.zst, head.zst, memory.md and memory.html go
# (default: .). Recording needs root, or CAP_BPF and CAP_PERFMON.
set -u
if [ $# -lt 2 ]; then
  sed -n '2,15p' "$0" >&2
  exit 2
fi
base_program=$1
head_program=$2
shift 2
memtrack=${MEMTRACK:-memtrack}
out=${OUT_DIR:-.}
mkdir -p "$out" || exit 3
for side in base head; do
  if [ "$side" = base ]; then program=$base_program; else program=$head_program; fi
  # Split on purpose: each holds several arguments.
  # shellcheck disable=SC2086
  if ! "$memtrack" record -q --stacks ${RECORD_OPTIONS:-} -o "$out/$side.zst" -- "$program" ${BENCH_ARGS:-}; then
    echo "memory-diff.sh: the $side benchmark failed ($program)" >&2
    exit 3
  fi
done
"$memtrack" diff "$out/base.zst" "$out/head.zst" --format markdown -o "$out/memory.md" "$@"
status=$?
# The page for a closer look (an artifact of the job); its status is the same.
"$memtrack" diff "$out/base.zst" "$out/head.zst" --format html -o "$out/memory.html" "$@" 2>/dev/null
if [ -f "$out/memory.md" ]; then
  cat "$out/memory.md"
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$out/memory.md" >> "$GITHUB_STEP_SUMMARY"; fi
fi
exit $status

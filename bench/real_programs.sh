#!/bin/sh
# Stack capture on two real programs from Debian: definitions per 1,000
# allocations and artifact bytes per allocation, walk mode vs raw mode, and
# wall time against capture off.
# Usage: bench/real_programs.sh [BUILD_DIR]
set -eu
. "$(dirname "$0")/common.sh"

cat >"$tmp/work.sql" <<'SQL'
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, value REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO t SELECT i, 'name-' || i, i * 0.5 FROM n;
CREATE INDEX t_name ON t(name);
SELECT count(*), sum(value) FROM t WHERE name LIKE 'name-1%';
SELECT name FROM t ORDER BY value DESC LIMIT 5;
SQL
cat >"$tmp/work.py" <<'PY'
import collections, json, re
words = [f"w{i % 997}" for i in range(200000)]
counts = collections.Counter(words)
text = json.dumps({k: v for k, v in counts.items()})
data = json.loads(text)
print(len(data), len(re.findall(r"w[0-9]+", " ".join(words[:50000]))))
PY

figure() {  # figure NAME JSONFILE KEY
  awk -F': ' -v key="\"$2\"" '$1 ~ key {gsub(/[ ,]/, "", $2); print $2; exit}' "$1"
}

for program in sqlite python; do
  if [ $program = sqlite ]; then cmd="sqlite3 :memory:"; input="$tmp/work.sql"; else cmd="/usr/bin/python3 $tmp/work.py"; input=/dev/null; fi
  for mode in off walk raw; do
    flags=""; [ $mode != off ] && flags="--stacks --stack-mode $mode"
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$memtrack" record -q $flags -o "$tmp/$program-$mode.zst" -- $cmd <"$input" >/dev/null
    end=$(date +%s.%N)
    "$memtrack" info --format json "$tmp/$program-$mode.zst" >"$tmp/info.json"
    events=$(figure "$tmp/info.json" events)
    defs=$(figure "$tmp/info.json" stack_definitions)
    allocs=$(figure "$tmp/info.json" allocations_with_stack)
    size=$(stat -c %s "$tmp/$program-$mode.zst")
    awk -v p=$program -v m=$mode -v e="$events" -v d="${defs:-0}" -v a="${allocs:-0}" -v s="$size" -v t0="$start" -v t1="$end" 'BEGIN {
      printf "%-7s %-5s wall %.2f s, %d events, %d allocations with stack, %d definitions (%.1f per 1000 allocations), %.1f bytes per event\n",
             p, m, t1 - t0, e, a, d, a ? 1000 * d / a : 0, s / e }'
  done
done

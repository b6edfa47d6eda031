#!/bin/sh
# The HTML report of the 10 M-event artifact of bench/report.sh: the time and
# peak RSS of `report --format html` next to `--format json`, the page's size,
# and how long headless Chromium takes from navigation start until the flame
# graph is drawn and the page answers input (tests/browser/html_report_test.py
# --measure: median of 5 loads, LOADS=N for more), next to the same figure of
# the browser test's 4-call-path page (the browser's fixed cost at the
# machine's load), loaded in turn with it. Needs the tests built
# (html_report_pages). Usage: bench/html_report.sh [BUILD_DIR]
set -eu
. "$(dirname "$0")/common.sh"
"$build/bench/make_report_trace" "$tmp/trace.zst" "${EVENTS:-10000000}" "${STACKS:-20000}" "${ADDRESSES:-5000}"
for format in json html; do
  /usr/bin/time -f "$format: %e s wall, %U s user, peak RSS %M KiB" "$memtrack" report --format "$format" \
    -o "$tmp/report.$format" "$tmp/trace.zst"
done
"$build/tests/unit/output/html_report_pages" "$tmp" > /dev/null
python3 -B "$(dirname "$0")/../tests/browser/html_report_test.py" --measure "$tmp/stacks.html" "$tmp/report.html"

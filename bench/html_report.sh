#!/bin/sh
# The HTML report of the 10 M-event artifact of bench/report.sh: the time and
# peak RSS of `report --format html` next to `--format json`, the page's size,
# and how long headless Chromium takes from navigation start until the flame
# graph is drawn and the page answers input (median of 3 loads,
# tests/browser/html_report_test.py --measure). Usage: bench/html_report.sh [BUILD_DIR]
set -eu
. "$(dirname "$0")/common.sh"
"$build/bench/make_report_trace" "$tmp/trace.zst" "${EVENTS:-10000000}" "${STACKS:-20000}" "${ADDRESSES:-5000}"
for format in json html; do
  /usr/bin/time -f "$format: %e s wall, %U s user, peak RSS %M KiB" "$memtrack" report --format "$format" \
    -o "$tmp/report.$format" "$tmp/trace.zst"
done
python3 "$(dirname "$0")/../tests/browser/html_report_test.py" --measure "$tmp/report.html"

#!/usr/bin/env python3
"""The HTML report in a real browser: headless Chromium loads the pages
html_report_pages writes and checks what a user sees.

  html_report_test.py HTML_REPORT_PAGES   the test (ctest html_report_browser_test)
  html_report_test.py --measure PAGE...   load each page 3 times, print the time to interactive

Each page is loaded as is, plus two observer scripts: one first in <head>
that records script errors and console.error calls, one last in <body> that
drives the page (search, cost, direction) through its controls and writes
what it saw as JSON into the DOM, which --dump-dom prints. Exits 77 (ctest:
skipped) when Chromium is not installed.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1280,1000", "--enable-logging=stderr", "--v=0"]

OBSERVE_ERRORS = """<script>
window.__errors = [];
window.addEventListener("error", e => window.__errors.push("error: " + e.message));
window.addEventListener("unhandledrejection", e => window.__errors.push("rejection: " + e.reason));
const consoleError = console.error;
console.error = (...args) => { window.__errors.push("console.error: " + args.join(" ")); consoleError(...args); };
</script>"""

# Runs after the page's own script; SEARCH is the text typed in the search box.
DRIVE_PAGE = """<script>
(function () {
  const result = {errors: window.__errors, pwned: window.pwned === undefined ? null : window.pwned};
  const mark = performance.getEntriesByName("memtrack-interactive")[0];
  result.interactive_ms = mark ? mark.startTime : null;
  const start = performance.getEntriesByName("memtrack-start")[0];
  result.script_ms = mark && start ? mark.startTime - start.startTime : null;
  result.ready = document.documentElement.dataset.ready === "1";
  const canvas = document.getElementById("flame");
  const status = document.getElementById("flame-status");
  result.flame_hidden = document.getElementById("flame-wrap").hidden;
  result.root_total = canvas.dataset.rootTotal === undefined ? null : Number(canvas.dataset.rootTotal);
  result.drawn = Number(canvas.dataset.drawn || 0);
  result.canvas_height = canvas.height;
  result.status = status.textContent;
  result.summary = document.getElementById("summary").innerText;
  result.command = document.getElementById("command").textContent;
  result.sites_rows = document.querySelectorAll("#sites tr.site").length;
  result.counters_text = document.getElementById("counters").textContent;
  result.timeline_text = document.getElementById("timeline").textContent;
  const chart = document.querySelector("#timeline svg");
  if (chart) {  // drag over 30 %..60 % of the chart's width
    const r = chart.getBoundingClientRect();
    chart.dispatchEvent(new MouseEvent("mousedown", {clientX: r.left + 0.3 * r.width, clientY: r.top + 50}));
    chart.dispatchEvent(new MouseEvent("mousemove", {clientX: r.left + 0.6 * r.width, clientY: r.top + 50}));
    window.dispatchEvent(new MouseEvent("mouseup"));
    result.window_text = document.getElementById("timeline-window").textContent;
  }
  const search = document.getElementById("search");
  if (!result.flame_hidden) {
    search.value = SEARCH;
    search.dispatchEvent(new Event("input"));
    result.search_highlighted = Number(canvas.dataset.highlighted);
    result.search_matched = status.dataset.matched === undefined ? null : Number(status.dataset.matched);
    result.search_status = status.textContent;
    search.value = "";
    search.dispatchEvent(new Event("input"));
    const select = document.getElementById("cost");
    select.value = "count";
    select.dispatchEvent(new Event("change"));
    result.count_root_total = Number(canvas.dataset.rootTotal);
    const bottomUp = document.querySelector("input[name=direction][value=bottom-up]");
    bottomUp.checked = true;
    bottomUp.dispatchEvent(new Event("change"));
    result.bottom_up_root_total = Number(canvas.dataset.rootTotal);
    const first = document.querySelector("#sites tr.site");
    if (first) { first.click(); result.expanded_frames = document.querySelectorAll("#sites tr.stack li").length; }
  }
  result.errors = window.__errors;
  const out = document.createElement("pre");
  out.id = "browser-test-result";
  out.textContent = JSON.stringify(result);
  document.body.append(out);
})();
</script>"""


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def with_timeline(page):
    """The page with a timeline in its JSON report, in the schema of the JSON
    report's "timeline" (docs/REPORT.md): 50 buckets of 40 ms over 2 s."""
    match = re.search(r'(<script type="application/json" id="memtrack-data">)(.*?)(</script>)', page, re.S)
    data = json.loads(match.group(2))
    buckets = 50
    columns = {"start_ns": [i * 40_000_000 for i in range(buckets)], "allocations": [10] * buckets,
               "allocated_bytes": [1000] * buckets}
    for series, base in (("heap", 1000), ("rss", 5000), ("rss_file", 0), ("rss_anon", 0), ("rss_shmem", 0),
                         ("rss_swap", 0), ("mapped", 3000)):
        columns[series + "_min"] = [base + 10 * i for i in range(buckets)]
        columns[series + "_max"] = columns[series + "_last"] = [base + 20 * i for i in range(buckets)]
    peaks = {"heap": {"bytes": 1980, "time_ns": 1_500_000_000}, "rss": {"bytes": 5980, "time_ns": 1_900_000_000},
             "mapped": {"bytes": 3980, "time_ns": 1_960_000_000}}
    data["report"]["timeline"] = {"from_ns": 0, "to_ns": None, "series": ["heap", "rss", "mapped"], "processes": [],
                                  "total": {"pid": None, "bucket_ns": 40_000_000, "has_rss": True, "has_mapped": True,
                                            "peaks": peaks, "rss_to_heap": 3.0, "buckets": columns}}
    return page[:match.start(2)] + json.dumps(data).replace("<", "\\u003c") + page[match.end(2):]


def load(browser, page_path, search, workdir, transform=None, drive=None):
    """Loads page_path with the observers (`drive`: another driving script);
    returns (result dict, chromium's stderr)."""
    with open(page_path, encoding="utf-8") as f:
        page = f.read()
    if transform:
        page = transform(page)
    page = page.replace("<head>", "<head>" + OBSERVE_ERRORS, 1)
    drive = drive or DRIVE_PAGE.replace("SEARCH", json.dumps(search))
    at = page.rindex("</body>")
    page = page[:at] + drive + page[at:]
    harness = os.path.join(workdir, "harness-" + os.path.basename(page_path))
    with open(harness, "w", encoding="utf-8") as f:
        f.write(page)
    profile_dir = tempfile.mkdtemp(dir=workdir)
    run = subprocess.run([browser, *CHROMIUM_FLAGS, "--user-data-dir=" + profile_dir, "--dump-dom",
                          "file://" + harness], capture_output=True, text=True, timeout=60)
    match = re.search(r'<pre id="browser-test-result">(.*?)</pre>', run.stdout, re.S)
    if not match:
        raise AssertionError(f"no result from {page_path}: exit {run.returncode}\n{run.stderr[-3000:]}")
    text = match.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")
    return json.loads(text), run.stderr


failures = []


def check(condition, what):
    print(("ok      " if condition else "FAILED  ") + what)
    if not condition:
        failures.append(what)


def console_errors(stderr):
    return [line for line in stderr.splitlines() if "CONSOLE" in line and ("Uncaught" in line or "rror" in line)]


def test(pages_tool):
    browser = chromium()
    if not browser:
        print("SKIPPED: chromium is not installed (scripts/install-deps.sh installs it); "
              "the HTML report was NOT checked in a browser", file=sys.stderr)
        return 77
    with tempfile.TemporaryDirectory() as workdir:
        subprocess.run([pages_tool, workdir], check=True)
        with open(os.path.join(workdir, "stacks.json"), encoding="utf-8") as f:
            expected = json.load(f)
        totals = expected["totals"]

        result, stderr = load(browser, os.path.join(workdir, "stacks.html"), "make_widget", workdir, with_timeline)
        check(result["errors"] == [] and not console_errors(stderr),
              f"no script error or console error: {result['errors']} {console_errors(stderr)}")
        check(result["ready"], "the page finished rendering")
        check(result["pwned"] is None, "names made of markup did not run as script")
        check(expected["header"]["command"][1] in result["command"], "the hostile command line shows as text")
        check(result["root_total"] == totals["total_allocated"] == 5626,
              f"flame graph root = total allocated bytes of the JSON report ({result['root_total']})")
        check(result["drawn"] >= 8 and result["canvas_height"] > 0, f"the flame graph drew its frames ({result['drawn']})")
        check(result["count_root_total"] == totals["alloc_calls"] == 19,
              f"weighted by allocations, the root = alloc_calls ({result['count_root_total']})")
        check(result["bottom_up_root_total"] == 19, "bottom-up, the same root")
        # make_widget is on the path of site 0 only (1000 B): site 1's frame has the hostile name.
        check(result["search_highlighted"] >= 1, f"search highlights make_widget ({result['search_highlighted']} frames)")
        check(result["search_matched"] == 1000,
              f"search totals the matching frames' bytes once per path ({result['search_matched']})")
        check("5.49 KiB" in result["summary"] and "4.30 KiB" in result["summary"],
              "the summary shows total allocated and peak as the JSON report has them")
        check("ring_pauses" in result["counters_text"], "the recorder's counters are listed")
        check(result["sites_rows"] == 4, f"the call-path table lists the 4 call paths ({result['sites_rows']})")
        check(result.get("expanded_frames", 0) >= 2, "a call-path row expands to its frames")
        check("RSS, peak 5.84 KiB" in result["timeline_text"] and "heap (live bytes), peak 1.93 KiB" in result["timeline_text"],
              "the memory chart draws the timeline's series with their peaks")
        check("Peak RSS5.84 KiB" in result["summary"].replace("\n", ""), "the summary shows the peak RSS")
        check(re.search(r"--from 0\.\d+ --to 1\.\d+ --format html", result.get("window_text", "")) is not None,
              f"dragging over the chart selects a window and gives its command ({result.get('window_text')})")
        print(f"        time to interactive: {result['interactive_ms']:.0f} ms")

        result, stderr = load(browser, os.path.join(workdir, "no-stacks.html"), "", workdir)
        check(result["errors"] == [] and not console_errors(stderr), f"no-stacks page: no errors {result['errors']}")
        check(result["ready"] and result["flame_hidden"], "no-stacks page rendered, without a flame graph")
        check("--stacks" in result["status"], "no-stacks page says how to get call paths")
        check("5.49 KiB" in result["summary"], "no-stacks page shows the summary")
        check("No timeline" in result["timeline_text"], "without a timeline the page says so")
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    return 0


def measure(pages):
    browser = chromium()
    if not browser:
        sys.exit("chromium is not installed")
    with tempfile.TemporaryDirectory() as workdir:
        for page in pages:
            runs = sorted((load(browser, page, "malloc", workdir)[0] for _ in range(3)), key=lambda r: r["interactive_ms"])
            each = ", ".join(f"{r['interactive_ms']:.0f}" for r in runs)
            print(f"{page}: {os.path.getsize(page) / 1e6:.2f} MB; median of 3 loads: interactive "
                  f"{runs[1]['interactive_ms']:.0f} ms after navigation start, of which the page's script "
                  f"{runs[1]['script_ms']:.0f} ms (each: {each} ms)")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--measure":
        measure(sys.argv[2:])
    elif len(sys.argv) == 2:
        sys.exit(test(sys.argv[1]))
    else:
        sys.exit(__doc__)

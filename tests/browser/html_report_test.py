#!/usr/bin/env python3
"""The HTML report in a real browser: headless Chromium loads the pages
html_report_pages writes and checks what a user sees.

  html_report_test.py HTML_REPORT_PAGES MEMTRACK HTML_WINDOW_TRACE   the test (ctest html_report_browser_test)
  html_report_test.py --hostile-symbols MEMTRACK FX_HOSTILE_NAMES   records the program, checks its names
                                          (ctest html_hostile_names_browser_test; needs root or
                                          CAP_BPF+CAP_PERFMON)
  html_report_test.py --measure PAGE...   load the pages in turn 5 times (LOADS), print each one's
                                          median time to interactive
  html_report_test.py --screenshot PAGE PNG   a 1280x1000 screenshot of PAGE (README's docs/html-report.png)

Each page is loaded as is, plus two observer scripts: one first in <head>
that records script errors and console.error calls, one last in <body> that
drives the page (search, cost, direction) through its controls and writes
what it saw as JSON into the DOM, which --dump-dom prints. Exits 77 (ctest:
skipped) when Chromium is not installed.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # importing browser_harness leaves no __pycache__ in the source tree
from browser_harness import check, chromium, chromium_or_skip, console_errors, exit_status, load, screenshot

# The name of fx_hostile_names's asm-labelled function (tests/fixtures/fx_hostile_names_nodebug.cpp).
EVIL_SYMBOL = "evil<script>alert(1)</script>\"'&"

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
  result.alerts = document.getElementById("alerts").textContent;
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
  window.__finish(result);
})();
</script>"""


# Runs after the page's own script on the page of html_window_trace's
# artifact: brushes FROM..TO (fractions of the chart's width), reads the
# window the page chose, its flame graph roots and its call-path table, then
# the notes of a cost a window cannot filter, the peak button and the
# per-process chart.
DRIVE_WINDOW = """<script>
(function () {
  const result = {errors: window.__errors};
  const canvas = document.getElementById("flame");
  const select = document.getElementById("cost");
  const direction = value => {
    const radio = document.querySelector("input[name=direction][value=" + value + "]");
    radio.checked = true;
    radio.dispatchEvent(new Event("change"));
  };
  const cost = value => { select.value = value; select.dispatchEvent(new Event("change")); };
  const roots = () => {
    const out = {};
    for (const d of ["top-down", "bottom-up"]) {
      direction(d);
      for (const c of ["bytes", "count"]) { cost(c); out[d + " " + c] = Number(canvas.dataset.rootTotal); }
    }
    direction("top-down");
    cost("bytes");
    return out;
  };
  const rows = () => Array.from(document.querySelectorAll("#sites tr.site")).map(
    r => [r.cells[0].textContent, ...JSON.parse(r.dataset.costs).slice(0, 2)]);
  result.whole = roots();
  // A tooltip names the frame and every cost; a click zooms in.
  const box = canvas.getBoundingClientRect();
  const at = {clientX: box.left + 5, clientY: box.top + 3 * 18 + 9};
  canvas.dispatchEvent(new MouseEvent("mousemove", at));
  result.tooltip = document.getElementById("tooltip").hidden ? "" : document.getElementById("tooltip").textContent;
  canvas.dispatchEvent(new MouseEvent("click", at));
  result.zoomed_status = document.getElementById("flame-status").textContent;
  document.getElementById("reset-zoom").click();
  result.leak_rows_closed = document.querySelectorAll("#leaks tr.site").length;
  document.querySelector("#leaks").parentElement.querySelector("summary").click();
  result.leak_rows = document.querySelectorAll("#leaks tr.site").length;
  result.outcomes = document.getElementById("outcomes").textContent;
  const chart = document.querySelector("#timeline svg");
  const r = chart.getBoundingClientRect();
  chart.dispatchEvent(new MouseEvent("mousedown", {clientX: r.left + FROM * r.width, clientY: r.top + 80}));
  chart.dispatchEvent(new MouseEvent("mousemove", {clientX: r.left + TO * r.width, clientY: r.top + 80}));
  window.dispatchEvent(new MouseEvent("mouseup"));
  const status = document.getElementById("timeline-window");
  result.window_text = status.textContent;
  result.window_ns = [Number(status.dataset.fromNs), Number(status.dataset.toNs)];
  result.windowed = roots();
  result.rows = rows();
  result.flame_status = document.getElementById("flame-status").textContent;
  cost("peak");
  const notice = document.getElementById("flame-window");
  result.peak_notice = notice.hidden ? "" : notice.textContent;
  result.peak_root = Number(canvas.dataset.rootTotal);
  result.peak_header = document.querySelector("#sites th.sorted").textContent;
  cost("bytes");
  result.bytes_notice = notice.hidden ? "" : notice.textContent;
  document.getElementById("timeline-peak").click();
  result.peak_window_ns = [Number(status.dataset.fromNs), Number(status.dataset.toNs)];
  result.peak_window_root = Number(canvas.dataset.rootTotal);
  document.getElementById("timeline-clear").click();
  result.cleared_root = Number(canvas.dataset.rootTotal);
  result.peak_labels = Array.from(document.querySelectorAll("#timeline .peak-label")).map(t => t.textContent);
  const envelopes = () => document.querySelectorAll("#timeline path[class^=envelope-]").length;
  result.envelopes = [envelopes()];
  Array.from(document.querySelectorAll("#timeline .legend")).find(t => t.textContent.includes("RSS")).dispatchEvent(new MouseEvent("click"));
  result.envelopes.push(envelopes());
  const chooser = document.getElementById("timeline-process");
  result.process_options = Array.from(chooser.options).map(o => o.textContent);
  chooser.value = "1";
  chooser.dispatchEvent(new Event("change"));
  result.process_labels = Array.from(document.querySelectorAll("#timeline .peak-label")).map(t => t.textContent);
  window.__finish(result);
})();
</script>"""


# Runs after the page's own script on the page of a recording of
# fx_hostile_names: the page's elements (none made from the names), what
# alert() was given (nothing), the call-path table's functions and the
# tooltip of every frame the flame graph drew (found by moving the mouse
# over each row, 2 px at a time).
DRIVE_HOSTILE = """<script>
(function () {
  const result = {alerts: window.__alerts, pwned: window.pwned === undefined ? null : window.pwned};
  result.ready = document.documentElement.dataset.ready === "1";
  result.scripts = document.scripts.length;
  result.elements = Array.from(document.querySelectorAll("#sites *, #leaks *, #flame-wrap *, #flame-status *"))
    .map(e => e.tagName.toLowerCase()).filter((t, i, all) => all.indexOf(t) === i).sort();
  result.functions = Array.from(document.querySelectorAll("#sites tr.site td.f")).map(td => td.textContent);
  const canvas = document.getElementById("flame");
  const tooltip = document.getElementById("tooltip");
  const box = canvas.getBoundingClientRect();
  const names = new Set();
  for (let y = 9; y < box.height; y += 18)
    for (let x = 1; x < box.width; x += 2) {
      canvas.dispatchEvent(new MouseEvent("mousemove", {clientX: box.left + x, clientY: box.top + y}));
      if (!tooltip.hidden) names.add(tooltip.textContent.split("\\n")[0]);
    }
  result.tooltips = Array.from(names);
  const first = document.querySelector("#sites tr.site");
  if (first) { first.click(); result.expanded = Array.from(document.querySelectorAll("#sites tr.stack li")).map(li => li.textContent); }
  result.alerts = window.__alerts;
  window.__finish(result);
})();
</script>"""

# alert() records what it was asked to show instead of showing it.
OBSERVE_ALERTS = "<script>window.__alerts = []; window.alert = m => window.__alerts.push(String(m));</script>"


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


def with_lost_events(page):
    """The page with 1,234 lost events in its report."""
    match = re.search(r'(<script type="application/json" id="memtrack-data">)(.*?)(</script>)', page, re.S)
    data = json.loads(match.group(2))
    data["report"]["lost_events"] = 1234
    return page[:match.start(2)] + json.dumps(data).replace("<", "\\u003c") + page[match.end(2):]


def drive_page(search):
    """DRIVE_PAGE typing `search` in the search box."""
    return DRIVE_PAGE.replace("SEARCH", json.dumps(search))


def report_json(memtrack, artifact, *args):
    run = subprocess.run([memtrack, "report", "--format", "json", "--top", "0", *args, artifact],
                         capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        raise AssertionError(f"memtrack report {args} failed: {run.stderr}")
    return json.loads(run.stdout)


def top_sites(report):
    """(allocating function, bytes, allocations) of the JSON report's call paths, by bytes."""
    sites = [(s["allocating_function"], s["costs"]["allocated_bytes"], s["costs"]["allocations"])
             for s in report["profile"]["sites"] if s["costs"]["allocated_bytes"] > 0]
    return sorted(sites, key=lambda s: -s[1])


def test_window(browser, memtrack, trace_tool, workdir):
    """Brushing a window of a real report's page gives the flame graph roots and
    the call paths that `memtrack report --from A --to B` gives for it."""
    artifact = os.path.join(workdir, "phases.zst")
    page = os.path.join(workdir, "phases.html")
    subprocess.run([trace_tool, artifact], check=True)
    subprocess.run([memtrack, "report", "--format", "html", "-o", page, artifact], check=True, timeout=60)
    whole = report_json(memtrack, artifact)
    drive = DRIVE_WINDOW.replace("FROM", "0.3").replace("TO", "0.55")
    result, stderr = load(browser, page, drive, workdir)
    check(result["errors"] == [] and not console_errors(stderr),
          f"window page: no script error or console error: {result['errors']} {console_errors(stderr)}")
    totals = whole["profile"]["totals"]
    check(result["whole"] == {"top-down bytes": totals["allocated_bytes"], "top-down count": totals["allocations"],
                              "bottom-up bytes": totals["allocated_bytes"], "bottom-up count": totals["allocations"]},
          f"without a window the roots are the report's totals ({result['whole']})")
    check(result["tooltip"].startswith("[0x401300]") and "bytes allocated: " in result["tooltip"]
          and "bytes live at the peak: " in result["tooltip"], f"a frame's tooltip names it with every cost ({result['tooltip']!r})")
    check("zoomed on [0x401300]" in result["zoomed_status"], f"a click zooms on the frame ({result['zoomed_status']})")
    leaking = [s for s in whole["profile"]["sites"] if s["costs"]["leaked_bytes"] > 0]
    check(result["leak_rows_closed"] == 0 and result["leak_rows"] == len(leaking) > 0,
          f"the leaks table lists the leaking call paths once opened ({result['leak_rows_closed']}, {result['leak_rows']})")
    check("complete" in result["outcomes"], "the table of how call paths ended is there")
    match = re.search(r"--from (\S+) --to (\S+) ", result["window_text"])
    check(match is not None, f"the window gives its --from/--to ({result['window_text']})")
    if not match:
        return
    start_ns, end_ns = result["window_ns"]
    check(0.25e9 < start_ns < 0.65e9 and 0.95e9 < end_ns < 1.25e9,
          f"the window is where the brush went: {start_ns} - {end_ns} ns")
    windowed = report_json(memtrack, artifact, "--from", match.group(1), "--to", match.group(2))
    wt = windowed["profile"]["totals"]
    check(0 < wt["allocated_bytes"] < totals["allocated_bytes"], "the window holds part of the allocations")
    check(result["windowed"] == {"top-down bytes": wt["allocated_bytes"], "top-down count": wt["allocations"],
                                 "bottom-up bytes": wt["allocated_bytes"], "bottom-up count": wt["allocations"]},
          f"brushed, the flame graph's roots are those of report --from {match.group(1)} --to {match.group(2)}: "
          f"page {result['windowed']}, report {wt['allocated_bytes']} B in {wt['allocations']} allocations")
    expected = [list(s) for s in top_sites(windowed)]
    check(result["rows"] == expected and len(expected) >= 3,
          f"brushed, the call-path table ranks as the window's report: page {result['rows']}, report {expected}")
    check("cannot be counted by the window" in result["peak_notice"] and "--by peak" in result["peak_notice"]
          and result["peak_root"] == totals["peak_bytes"],
          f"weighted by the peak, the page says a window cannot filter it and shows the whole run ({result['peak_notice']})")
    check("whole recording" in result["peak_header"], f"the table says which costs are not windowed ({result['peak_header']})")
    check(result["bytes_notice"] == "", "weighted by bytes, no such note")
    heap_peak = whole["timeline"]["total"]["peaks"]["heap"]
    pstart, pend = result["peak_window_ns"]
    check(pstart <= heap_peak["time_ns"] <= pend and result["peak_window_root"] > 0,
          f"the peak button selects the window of the heap peak at {heap_peak['time_ns']} ns: {pstart} - {pend}")
    check(result["cleared_root"] == totals["allocated_bytes"], "clearing the window restores the whole recording")
    check(any(label.startswith("heap peak") and f"{heap_peak['time_ns'] / 1e9:.3f} s" in label
              for label in result["peak_labels"]), f"the heap peak is labelled with its time ({result['peak_labels']})")
    check(any(label.startswith("rss peak") for label in result["peak_labels"]), "the RSS peak is labelled")
    check(result["envelopes"] == [3, 2], f"heap, RSS and mapped drawn; a click on RSS in the legend hides it ({result['envelopes']})")
    check(len(result["process_options"]) == 3 and "pid 101" in result["process_options"][2],
          f"the chart offers all processes and each one ({result['process_options']})")
    child = next(p for p in whole["timeline"]["processes"] if p["pid"] == 101)
    check(any(label.startswith("heap peak") and f"{child['peaks']['heap']['time_ns'] / 1e9:.3f} s" in label
              for label in result["process_labels"]), f"one process's chart has its own peak ({result['process_labels']})")
    size = screenshot(browser, page, os.path.join(workdir, "phases.png"), workdir)
    check(size == (1280, 1000), f"a screenshot of the page at 1280x1000 ({size})")


def test_hostile_symbols(browser, memtrack, fixture, workdir):
    """A real program whose symbol names are markup and quotes (fx_hostile_names):
    the symbolizer reads them unchanged, the text and JSON reports print them
    verbatim, and the HTML page shows them as text (table, tooltip) without
    running or building anything from them."""
    artifact = os.path.join(workdir, "hostile.zst")
    run = subprocess.run([memtrack, "record", "-q", "--stacks", "-o", artifact, "--", fixture],
                         capture_output=True, text=True, timeout=90)
    check(run.returncode == 0, f"memtrack record of fx_hostile_names: exit {run.returncode} {run.stderr[-2000:]}")
    if run.returncode != 0:
        return
    report = report_json(memtrack, artifact)
    functions = {s["allocating_function"]: s["costs"]["allocated_bytes"] for s in report["profile"]["sites"]}
    template = next((f for f in functions if "make_of<script&>" in f), None)
    check(functions.get(EVIL_SYMBOL) == 5000, f"the asm-labelled symbol is read unchanged: {list(functions)}")
    check(template is not None and functions[template] == 3000, f"the template over `script` is named so ({template!r})")
    text = subprocess.run([memtrack, "report", artifact], capture_output=True, text=True, timeout=60).stdout
    check(EVIL_SYMBOL in text and "make_of<script&>" in text, "the text report prints both names verbatim")
    page = os.path.join(workdir, "hostile.html")
    subprocess.run([memtrack, "report", "--format", "html", "-o", page, artifact], check=True, timeout=60)
    with open(page, encoding="utf-8") as f:
        data = re.search(r'<script type="application/json" id="memtrack-data">(.*?)</script>', f.read(), re.S).group(1)
    check("<" not in data and any(s["function"] == EVIL_SYMBOL for s in json.loads(data)["sites"]),
          "the page's data holds the names, with no '<' that could end its element")
    result, stderr = load(browser, page, DRIVE_HOSTILE, workdir,
                          transform=lambda p: p.replace("<head>", "<head>" + OBSERVE_ALERTS, 1))
    check(result["errors"] == [] and not console_errors(stderr),
          f"hostile names: no script error or console error: {result['errors']} {console_errors(stderr)}")
    check(result["ready"] and result["alerts"] == [] and result["pwned"] is None,
          f"no script made of the names ran (alert() got {result['alerts']})")
    check(result["scripts"] == 5, f"no element was made of the names: the page has its 5 scripts ({result['scripts']})")
    check("script" not in result["elements"], f"the tables and the flame graph hold no script element ({result['elements']})")
    check(EVIL_SYMBOL in result["functions"] and template in result["functions"],
          f"the call-path table shows both names as text: {result['functions']}")
    check(EVIL_SYMBOL in result["tooltips"] and any("make_of<script&>" in t for t in result["tooltips"]),
          f"the flame graph's tooltips name both frames verbatim: {result['tooltips']}")


def have_bpf_privileges():
    """Root, or CAP_BPF (39) and CAP_PERFMON (38) effective: what memtrack record needs."""
    if os.geteuid() == 0:
        return True
    with open("/proc/self/status", encoding="utf-8") as f:
        caps = next((int(line.split()[1], 16) for line in f if line.startswith("CapEff:")), 0)
    return bool(caps >> 39 & 1 and caps >> 38 & 1)


def test_hostile(memtrack, fixture):
    browser = chromium_or_skip("the HTML page of hostile symbol names")
    if not browser:
        return 77
    if not have_bpf_privileges():
        print("SKIPPED: memtrack record needs root or CAP_BPF+CAP_PERFMON: the HTML page of hostile symbol names "
              "was NOT checked", file=sys.stderr)
        return 77
    with tempfile.TemporaryDirectory() as workdir:
        test_hostile_symbols(browser, memtrack, fixture, workdir)
    return exit_status()


def test(pages_tool, memtrack, trace_tool):
    browser = chromium_or_skip("the HTML report")
    if not browser:
        return 77
    with tempfile.TemporaryDirectory() as workdir:
        subprocess.run([pages_tool, workdir], check=True)
        with open(os.path.join(workdir, "stacks.json"), encoding="utf-8") as f:
            expected = json.load(f)
        totals = expected["totals"]

        result, stderr = load(browser, os.path.join(workdir, "stacks.html"), drive_page("make_widget"), workdir, with_timeline)
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

        result, stderr = load(browser, os.path.join(workdir, "no-stacks.html"), drive_page(""), workdir, with_lost_events)
        check(result["errors"] == [] and not console_errors(stderr), f"no-stacks page: no errors {result['errors']}")
        check(result["ready"] and result["flame_hidden"], "no-stacks page rendered, without a flame graph")
        check("--no-stacks" in result["status"], "no-stacks page says how to get call paths")
        check("5.49 KiB" in result["summary"], "no-stacks page shows the summary")
        check("No timeline" in result["timeline_text"], "without a timeline the page says so")
        check("1,234 events were lost" in result["alerts"], f"lost events are shown loud ({result['alerts']})")

        test_window(browser, memtrack, trace_tool, workdir)
    return exit_status()


def measure(pages, loads=5):
    """Loads the pages in turn, `loads` rounds (interleaved, so they share the
    machine's load), and prints each one's median time to interactive: from
    navigation start until the page's script has drawn the flame graph and
    wired its controls (its "memtrack-interactive" mark)."""
    browser = chromium()
    if not browser:
        sys.exit("chromium is not installed")
    print(f"load average before: {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    runs = {page: [] for page in pages}
    with tempfile.TemporaryDirectory() as workdir:
        for _ in range(loads):
            for page in pages:
                runs[page].append(load(browser, page, drive_page("malloc"), workdir)[0])
    print(f"load average after: {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    for page in pages:
        each = sorted(runs[page], key=lambda r: r["interactive_ms"])
        middle = each[len(each) // 2]
        times = ", ".join(f"{r['interactive_ms']:.0f}" for r in each)
        print(f"{page}: {os.path.getsize(page) / 1e6:.2f} MB; median of {loads} loads: interactive "
              f"{middle['interactive_ms']:.0f} ms after navigation start, of which the page's script "
              f"{middle['script_ms']:.0f} ms (each: {times} ms)")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--measure":
        measure(sys.argv[2:], int(os.environ.get("LOADS", "5")))
    elif len(sys.argv) == 4 and sys.argv[1] == "--screenshot":
        browser = chromium() or sys.exit("chromium is not installed")
        with tempfile.TemporaryDirectory() as workdir:
            print(screenshot(browser, sys.argv[2], sys.argv[3], workdir))
    elif len(sys.argv) == 4 and sys.argv[1] == "--hostile-symbols":
        sys.exit(test_hostile(*sys.argv[2:]))
    elif len(sys.argv) == 4:
        sys.exit(test(*sys.argv[1:]))
    else:
        sys.exit(__doc__)

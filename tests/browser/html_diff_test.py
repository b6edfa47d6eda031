#!/usr/bin/env python3
"""The HTML page of `memtrack diff` in a real browser: headless Chromium loads
the pages html_diff_pages writes (or a page and the JSON output of the same
diff) and checks that what a user sees is the JSON output's figures.

  html_diff_test.py HTML_DIFF_PAGES     the test (ctest html_diff_browser_test)
  html_diff_test.py --page PAGE JSON    a page of `memtrack diff --format html` against the
                                        `--format json --top 500` output of the same recordings

Each page is loaded with the observers of browser_harness.py (script
errors and console.error) and a script that reads the page through its DOM
and controls and writes what it saw as JSON into the DOM. Exits 77 (ctest:
skipped) when Chromium is not installed.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # importing browser_harness leaves no __pycache__ in the source tree
from browser_harness import check, chromium_or_skip, console_errors, exit_status, load

# Runs after the page's own script: every table as cells (text and the exact
# data-value), the budgets in page order, the flame graph's totals for each
# cost and side, the process table for every figure.
READ_PAGE = """<script>
(function () {
  const cells = row => Array.from(row.cells).map(td => ({text: td.textContent,
    value: td.dataset.value === undefined ? null : Number(td.dataset.value)}));
  const result = {errors: window.__errors, pwned: window.pwned === undefined ? null : window.pwned};
  result.ready = document.documentElement.dataset.ready === "1";
  result.title = document.getElementById("title").textContent;
  result.verdict = document.getElementById("verdict").textContent;
  result.runs = document.getElementById("runs").textContent;
  result.alerts = Array.from(document.querySelectorAll("#alerts div")).map(d => d.textContent);
  result.budgets = Array.from(document.querySelectorAll("li.budget")).map(li => ({status: li.className.split(" ")[1],
    text: li.textContent}));
  result.totals = {};
  for (const row of document.querySelectorAll("#totals-table tbody tr")) result.totals[row.dataset.figure] = cells(row);
  const select = document.getElementById("process-figure");
  result.processes = {};
  for (const option of Array.from(select.options)) {
    select.value = option.value;
    select.dispatchEvent(new Event("change"));
    result.processes[option.value] = Array.from(document.querySelectorAll("#processes-table tbody tr")).map(cells);
  }
  result.sites_title = document.getElementById("sites-title").textContent;
  result.sites = Array.from(document.querySelectorAll("#sites-table tr.site")).map(r => ({status: r.dataset.status,
    cells: cells(r)}));
  const statusRadio = document.querySelector("input[name=status][value=new]");
  if (statusRadio) {
    statusRadio.checked = true;
    statusRadio.dispatchEvent(new Event("change"));
    result.new_sites = Array.from(document.querySelectorAll("#sites-table tr.site")).map(r => r.cells[1].textContent);
    const all = document.querySelector("input[name=status][value=all]");
    all.checked = true;
    all.dispatchEvent(new Event("change"));
  }
  const first = document.querySelector("#sites-table tr.site");
  if (first) { first.click(); result.expanded = Array.from(document.querySelectorAll("#sites-table tr.stack li")).map(li => li.textContent); }
  const canvas = document.getElementById("flame");
  result.flame_hidden = document.getElementById("flame-wrap").hidden;
  result.flame_status = document.getElementById("flame-status").textContent;
  result.flame = {};
  if (!result.flame_hidden) {
    const cost = document.getElementById("cost");
    for (const side of ["head", "base"]) {
      const radio = document.querySelector("input[name=side][value=" + side + "]");
      radio.checked = true;
      radio.dispatchEvent(new Event("change"));
      for (const option of Array.from(cost.options)) {
        cost.value = option.value;
        cost.dispatchEvent(new Event("change"));
        result.flame[side + "/" + option.value] = {base: Number(canvas.dataset.baseTotal), head: Number(canvas.dataset.headTotal),
          drawn: Number(canvas.dataset.drawn), grown: Number(canvas.dataset.grown), shrunk: Number(canvas.dataset.shrunk),
          vanished: Number(canvas.dataset.vanished),
          height: canvas.height};
      }
    }
  }
  window.__finish(result);
})();
</script>"""

def check_page_against_json(result, stderr, expected, name):
    """What every diff page must show: the JSON document's figures."""
    check(result["errors"] == [] and not console_errors(stderr),
          f"{name}: no script error or console error: {result['errors']} {console_errors(stderr)}")
    check(result["ready"], f"{name}: the page finished rendering")
    check(result["pwned"] is None, f"{name}: names made of markup did not run as script")
    single = expected["kind"] == "check"
    # Totals: base, head and change cells hold the JSON's exact values.
    for figure, c in expected["totals"].items():
        row = result["totals"].get(figure)
        # Blocks live at end only where a run has them (a recording that ended before a process).
        if figure in ("live_at_end", "live_at_end_blocks") and ((not c) if single else not c["base"] and not c["head"]):
            check(row is None, f"{name}: no totals row {figure}: no run has blocks live at end")
            continue
        if row is None:
            check(False, f"{name}: totals row {figure} missing")
            continue
        # row[0] is the figure's title.
        if single:
            seen = row[1]["value"] if c is not None else None
            check(seen == c, f"{name}: total {figure} = {c} ({seen})")
        elif c["base"] is None and c["head"] is None:
            check(row[1]["text"] == "not recorded", f"{name}: total {figure} not recorded")
        else:
            seen = [row[1]["value"], row[2]["value"], row[3]["value"]]
            check(seen == [c["base"], c["head"], c["change"]], f"{name}: total {figure} base/head/change = {seen}")
    # Processes, for every figure of the selector.
    for figure, rows in result["processes"].items():
        check(len(rows) == len(expected["processes"]), f"{name}: {figure}: one row per process")
        for row, p in zip(rows, expected["processes"]):
            c = p["figures"][figure]
            values = [cell["value"] for cell in row if cell["value"] is not None]
            want = ([c] if c is not None else []) if single else \
                [v for v in (c["base"], c["head"], c["change"]) if v is not None]
            check(values == want and p["name"] in row[0]["text"], f"{name}: process {p['name']} {figure} = {values}")
    # Budgets: broken first, each with its status.
    order = {"broken": 0, "error": 1, "held": 2}
    want = sorted(expected["budgets"], key=lambda b: order[b["status"]])
    seen = [(b["status"], b["text"]) for b in result["budgets"]]
    check([s for s, _ in seen] == [b["status"] for b in want] and
          all(b["expression"] in text for b, (_, text) in zip(want, seen)),
          f"{name}: budgets listed broken first: {[s for s, _ in seen]}")
    if expected["broken_budgets"]:
        check(f"{expected['broken_budgets']} of {len(expected['budgets'])} budgets broken" in result["verdict"],
              f"{name}: the verdict says how many budgets broke ({result['verdict']})")
    sites = expected["sites"]
    if sites is None:
        check(result["flame_hidden"] and result["sites"] == [], f"{name}: without compared call paths, no table or flame graph")
        return
    check(f"{sites['changed']} changed, {sites['matched']} matched, {sites['new']} new, {sites['gone']} gone"
          in result["sites_title"], f"{name}: the call paths' counts ({result['sites_title']})")
    check(len(result["sites"]) == len(sites["top"]), f"{name}: one row per changed call path ({len(result['sites'])})")
    for row, site in zip(result["sites"], sites["top"]):
        values = [cell["value"] for cell in row["cells"][2:5]]
        check(row["status"] == site["status"] and row["cells"][1]["text"].startswith(site["allocating_function"]) and
              values == [site["cost"]["base"], site["cost"]["head"], site["cost"]["change"]],
              f"{name}: call path {site['allocating_function'][:30]!r} {site['status']} {values}")
    if sites["top"]:
        check(len(result.get("expanded", [])) == len(sites["top"][0]["frames"]) and
              result["expanded"][0].startswith(sites["top"][0]["frames"][0]["label"]),
              f"{name}: a row expands to its frames ({result.get('expanded')})")
    new = [s["allocating_function"] for s in sites["top"] if s["status"] == "new"]
    check([n[:len(f)] == f for n, f in zip(result.get("new_sites", []), new)] == [True] * len(new) and
          len(result.get("new_sites", [])) == len(new), f"{name}: the 'new' filter lists the new call paths")
    # The flame graph's roots: every cost's totals of both runs, with either side's widths.
    check(not result["flame_hidden"], f"{name}: the differential flame graph is drawn")
    for key, flame in result["flame"].items():
        cost = key.split("/")[1]
        t = sites["totals"][cost]
        check(flame["base"] == t["base"] and flame["head"] == t["head"],
              f"{name}: flame graph {key}: root {flame['base']} -> {flame['head']} = the sites' totals")
        check(flame["drawn"] >= 1 and flame["height"] > 0, f"{name}: flame graph {key} drew {flame['drawn']} frames")


def test(pages_tool):
    browser = chromium_or_skip("the HTML diff")
    if not browser:
        return 77
    with tempfile.TemporaryDirectory() as workdir:
        subprocess.run([pages_tool, workdir], check=True)
        read = lambda name: json.load(open(os.path.join(workdir, name), encoding="utf-8"))
        expected = read("diff.json")
        result, stderr = load(browser, os.path.join(workdir, "diff.html"), READ_PAGE, workdir)
        check_page_against_json(result, stderr, expected, "diff")
        hostile = expected["head"]["command"][1]
        check(hostile in result["runs"], "the hostile command line shows as text")
        check(any(s["cells"][1]["text"].startswith(hostile) for s in result["sites"]),
              "the function named with markup shows as text in the table")
        rss = [cell["text"] for cell in result["totals"]["peak_rss"]]
        check(rss == ["peak RSS", "10.00 MiB", "11.00 MiB", "+1.00 MiB", "+10.0%"],
              f"peak RSS as the text output writes it {rss}")
        head_bytes = result["flame"]["head/bytes"]
        check(head_bytes["grown"] >= 2 and head_bytes["shrunk"] >= 1,
              f"frames coloured by growth and shrinkage ({head_bytes['grown']} grew, {head_bytes['shrunk']} shrank)")
        check(head_bytes["vanished"] == 0 and result["flame"]["base/bytes"]["vanished"] >= 1,
              "the call path gone from the head has no width there, and shows with the base's widths")

        result, stderr = load(browser, os.path.join(workdir, "check.html"), READ_PAGE, workdir)
        check_page_against_json(result, stderr, read("check.json"), "check")
        check(result["title"] == "memtrack check", "a check page says so")

        result, stderr = load(browser, os.path.join(workdir, "totals-only.html"), READ_PAGE, workdir)
        check(result["errors"] == [] and not console_errors(stderr), f"totals-only: no errors {result['errors']}")
        check(result["ready"] and result["flame_hidden"] and "--no-stacks" in result["flame_status"],
              "without call paths: no flame graph, and the page says how to get them")
        check(any("call paths" in a for a in result["alerts"]), "without call paths: the diff's note is shown")
    return exit_status()


def test_page(page, expected_json):
    browser = chromium_or_skip("the HTML diff")
    if not browser:
        return 77
    with open(expected_json, encoding="utf-8") as f:
        expected = json.load(f)
    with tempfile.TemporaryDirectory() as workdir:
        result, stderr = load(browser, page, READ_PAGE, workdir)
        check_page_against_json(result, stderr, expected, os.path.basename(page))
    return exit_status()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--page":
        sys.exit(test_page(sys.argv[2], sys.argv[3]))
    elif len(sys.argv) == 2:
        sys.exit(test(sys.argv[1]))
    else:
        sys.exit(__doc__)

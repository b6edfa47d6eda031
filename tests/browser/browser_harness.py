"""What the browser tests of memtrack's HTML pages share (html_report_test.py,
html_diff_test.py): finding Chromium, loading a page in it headless with an
observer of script errors first in <head> and a driving script last in
<body>, reading back what the driving script saw, and counting checks.

A driving script ends with `window.__finish(result)`: the result, with the
errors observed, goes into the DOM as JSON, which --dump-dom prints.
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
window.__finish = result => {
  result.errors = window.__errors;
  const out = document.createElement("pre");
  out.id = "browser-test-result";
  out.textContent = JSON.stringify(result);
  document.body.append(out);
};
</script>"""


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_or_skip(what):
    """Chromium's path; None, after saying `what` was not checked, when it is not installed."""
    browser = chromium()
    if not browser:
        print(f"SKIPPED: chromium is not installed (scripts/install-deps.sh installs it); {what} was NOT checked "
              "in a browser", file=sys.stderr)
    return browser


def load(browser, page_path, drive, workdir, transform=None):
    """Loads page_path with the error observer and the driving script `drive`
    (`transform`: applied to the page's text first); returns (result dict,
    chromium's stderr)."""
    with open(page_path, encoding="utf-8") as f:
        page = f.read()
    if transform:
        page = transform(page)
    page = page.replace("<head>", "<head>" + OBSERVE_ERRORS, 1)
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


def console_errors(stderr):
    return [line for line in stderr.splitlines() if "CONSOLE" in line and ("Uncaught" in line or "rror" in line)]


def screenshot(browser, page_path, png, workdir):
    """Chromium's screenshot of page_path at the size of CHROMIUM_FLAGS; returns (width, height)."""
    profile_dir = tempfile.mkdtemp(dir=workdir)
    subprocess.run([browser, *CHROMIUM_FLAGS, "--user-data-dir=" + profile_dir, "--hide-scrollbars",
                    "--screenshot=" + os.path.abspath(png), "file://" + os.path.abspath(page_path)],
                   capture_output=True, text=True, timeout=60)
    with open(png, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise AssertionError(f"{png} is not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


failures = []


def check(condition, what):
    print(("ok      " if condition else "FAILED  ") + what)
    if not condition:
        failures.append(what)


def exit_status():
    """0 when every check held; 1 (after saying how many failed) otherwise."""
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    return 0

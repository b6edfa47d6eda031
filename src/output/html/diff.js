// memtrack diff's HTML page. Reads the data embedded in the page
// (diff_html.cpp: the JSON document of `memtrack diff --format json` and the
// call trees of both runs) and draws it: the verdict and the budgets (broken
// first), the totals side by side, per process, the changed call paths with
// their stacks, and a differential flame graph. Every name from the
// recordings goes into the page as text (textContent, canvas fillText),
// never as markup.
"use strict";
(function () {
  performance.mark("memtrack-start");
  const data = JSON.parse(document.getElementById("memtrack-data").textContent);
  const doc = data.diff;
  const single = doc.kind === "check";
  const FIGURES = data.figures.map(([name, title, isBytes]) => ({ name, title, isBytes }));
  const COST_TITLES = {
    bytes: "bytes allocated", count: "allocations", peak: "bytes at the peak",
    leaked: "bytes leaked", live_at_end: "bytes live at end", temporary: "temporary allocations",
  };
  const BYTE_COSTS = new Set(["bytes", "peak", "leaked", "live_at_end"]);

  // ---- formatting, as the text output writes figures (output/units.cpp, diff_format.cpp) ----
  const integer = new Intl.NumberFormat("en-US");
  const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
  function bytes(n) {
    if (n < 1024) return n + " B";
    let value = n / 1024, unit = 1;
    while (value >= 1023.95 && unit + 1 < UNITS.length) { value /= 1024; unit++; }
    return value.toFixed(value < 99.995 ? 2 : 1) + " " + UNITS[unit];
  }
  function value(isBytes, n) {
    if (n === null || n === undefined) return "-";
    return isBytes ? bytes(n) : integer.format(n);
  }
  function change(isBytes, c) {
    if (c.change === null) return "";
    if (c.change === 0) return "0";
    return (c.change > 0 ? "+" : "-") + value(isBytes, Math.abs(c.change));
  }
  function relative(c) {
    if (c.base === 0 && c.head > 0) return "new";
    const p = c.relative_percent;
    if (p === null || p === 0) return "";
    return (p > 0 ? "+" : "") + p.toFixed(Math.abs(p) < 0.095 ? 2 : 1) + "%";
  }
  const costText = (cost, n) => value(BYTE_COSTS.has(cost), n);
  const direction = n => n > 0 ? "up" : n < 0 ? "down" : "";

  const el = memtrackElement;
  // A cell with its exact figure in data-value (the browser test reads it).
  function numberCell(text, exact, extra) {
    const td = el("td", { class: "n" + (extra ? " " + extra : ""), text });
    if (exact !== null && exact !== undefined) td.dataset.value = String(exact);
    return td;
  }
  function headerRow(headers, numeric) {
    return el("tr", null, headers.map((h, i) => el("th", { text: h, class: numeric[i] ? "n" : "" })));
  }

  // ---- runs, verdict, notes ----
  function commandOf(run) { return run.command.join(" "); }
  function renderRuns() {
    document.getElementById("title").textContent = single ? "memtrack check" : "memtrack diff";
    document.title = single ? "memtrack check" : "memtrack diff";
    const runs = document.getElementById("runs");
    const rows = single ? [["recording", doc.recording]] : [["base", doc.base], ["head", doc.head]];
    for (const [name, run] of rows)
      runs.append(el("tr", null, [el("td", { text: name }), el("td", { class: "mono", text: run.file }),
                                  el("td", { class: "mono", text: commandOf(run) })]));
    const broken = doc.broken_budgets, count = doc.budgets.length;
    const errors = doc.budgets.filter(b => b.status === "error").length;
    const verdict = document.getElementById("verdict");
    if (!count) verdict.textContent = "No budgets given (--fail-if, --max).";
    else if (broken) { verdict.textContent = "\u274c " + broken + " of " + count + " budgets broken"; verdict.classList.add("broken"); }
    else if (errors) { verdict.textContent = "\u26a0 " + errors + " budgets cannot be evaluated"; verdict.classList.add("error"); }
    else { verdict.textContent = "\u2705 " + count + " budgets held"; verdict.classList.add("held"); }
    const alerts = document.getElementById("alerts");
    for (const note of doc.notes) alerts.append(el("div", { class: "warn", text: "Note: " + note }));
    for (const [name, run] of rows) {
      for (const w of run.warnings) alerts.append(el("div", { class: "warn", text: name + ": " + w }));
      if (run.lost_events === null)
        alerts.append(el("div", { class: "warn", text: name + ": the recording was not finalized: lost events are unknown." }));
      else if (run.lost_events > 0)
        alerts.append(el("div", { class: "warn", text: name + ": " + integer.format(run.lost_events) + " events were lost." }));
    }
  }

  // ---- budgets: broken, then those that cannot be evaluated, then held ----
  function subjectText(subject) {
    if (subject === "total") return "total";
    if (single) return "process " + subject.name + " (pid " + subject.pid + ")";
    const pids = [subject.base && subject.base.pid, subject.head && subject.head.pid].filter(p => p !== null && p !== undefined);
    return "process " + subject.name + " (pid " + pids.join(" -> ") + ")";
  }
  function renderBudgets() {
    const box = document.getElementById("budgets");
    if (!doc.budgets.length) {
      box.append(el("p", { class: "note", text: "No budgets: give --fail-if 'peak>+5%' or --max 'peak<=64MiB' to gate CI." }));
      return;
    }
    const order = { broken: 0, error: 1, held: 2 };
    const sorted = doc.budgets.slice().sort((a, b) => order[a.status] - order[b.status]);
    const list = el("ul", { class: "budgets" });
    for (const b of sorted) {
      const figure = FIGURES.find(f => f.name === b.figure);
      const item = el("li", { class: "budget " + b.status }, [
        el("span", { class: "flag", text: b.status.toUpperCase() }),
        el("span", { class: "mono", text: (b.kind === "max" ? "--max " : "--fail-if ") + b.expression }),
        b.error ? el("span", { text: ": cannot be evaluated: " + b.error }) : null]);
      if (b.violations.length) {
        const violations = el("ul");
        for (const v of b.violations) {
          const values = single ? value(figure.isBytes, v.values)
            : value(figure.isBytes, v.values.base) + " -> " + value(figure.isBytes, v.values.head) + " (" +
              (change(figure.isBytes, v.values) || "?") + (relative(v.values) ? ", " + relative(v.values) : "") + ")";
          violations.append(el("li", { text: subjectText(v.subject) + ": " + b.figure + " " + values }));
        }
        item.append(violations);
      }
      list.append(item);
    }
    box.append(list);
  }

  // ---- totals and processes ----
  function figureCells(figure, c) {
    if (single) return [numberCell(value(figure.isBytes, c), c)];
    return [numberCell(value(figure.isBytes, c.base), c.base), numberCell(value(figure.isBytes, c.head), c.head),
            numberCell(change(figure.isBytes, c), c.change, direction(c.change)), numberCell(relative(c), null)];
  }
  function renderTotals() {
    const headers = single ? ["", "value"] : ["", "base", "head", "change", ""];
    const body = el("tbody");
    for (const f of FIGURES) {
      const c = doc.totals[f.name];
      // Live at end only where a run has it (a recording that ended before a process), as the text.
      const liveAtEnd = f.name === "live_at_end" || f.name === "live_at_end_blocks";
      if (liveAtEnd && (single ? !c : !c.base && !c.head)) continue;
      const known = single ? c !== null : c.base !== null || c.head !== null;
      const row = el("tr", { "data-figure": f.name }, [el("td", { text: f.title })]);
      if (!known) row.append(el("td", { class: "n", text: "not recorded", colspan: String(headers.length - 1) }));
      else row.append(...figureCells(f, c));
      body.append(row);
    }
    document.getElementById("totals").append(el("table", { id: "totals-table" }, [
      el("thead", null, [headerRow(headers, headers.map((h, i) => i > 0))]), body]));
  }
  function renderProcesses(figureName) {
    const box = document.getElementById("processes");
    box.replaceChildren();
    const figure = FIGURES.find(f => f.name === figureName);
    const headers = single ? ["process", "pid", figure.title]
      : ["process", "matched by", "base pid", "head pid", "base", "head", "change", ""];
    const body = el("tbody");
    for (const p of doc.processes) {
      const indent = "\u00a0\u00a0".repeat(Math.min(p.depth, 6));
      const status = single ? "" : !p.base ? " (new)" : !p.head ? " (gone)" : "";
      const cells = [el("td", { class: "f", text: indent + p.name + status })];
      if (single) cells.push(el("td", { class: "n", text: String(p.pid) }));
      else cells.push(el("td", { text: p.matched_by || "" }), el("td", { class: "n", text: p.base ? String(p.base.pid) : "" }),
                      el("td", { class: "n", text: p.head ? String(p.head.pid) : "" }));
      const c = p.figures[figure.name];
      const known = single ? c !== null : c.base !== null || c.head !== null;
      if (known) cells.push(...figureCells(figure, c));
      else cells.push(el("td", { class: "n", text: "not recorded", colspan: single ? "1" : "4" }));
      body.append(el("tr", { class: "process" }, cells));
    }
    box.append(el("table", { id: "processes-table" }, [el("thead", null, [headerRow(headers, headers.map((h, i) => i > 0))]), body]));
  }

  // ---- changed call paths ----
  function frameItem(f) {
    const loc = (f.file ? " " + f.file + (f.line ? ":" + f.line : "") : "") + (f.module ? " (" + f.module + ")" : "");
    return el("li", null, [f.label, f.inlined ? el("span", { class: "inl", text: " inlined" }) : null,
                           el("span", { class: "loc", text: loc })]);
  }
  function renderSites(status) {
    const box = document.getElementById("sites");
    box.replaceChildren();
    const sites = doc.sites;
    if (!sites) {
      document.getElementById("sites-controls").hidden = true;
      box.append(el("p", { class: "note", text: single ? "One recording: no call paths are compared." :
        "Call paths were not compared: both recordings need them (recorded without --no-stacks)." }));
      return;
    }
    const by = sites.by, isBytes = BYTE_COSTS.has(by);
    document.getElementById("sites-title").textContent = "Call paths by " + COST_TITLES[by] + ": " +
      integer.format(sites.changed) + " changed, " + integer.format(sites.matched) + " matched, " +
      integer.format(sites.new) + " new, " + integer.format(sites.gone) + " gone";
    const shown = sites.top.filter(s => status === "all" || s.status === status);
    const headers = ["#", "allocating function", "base", "head", "change", ""];
    const body = el("tbody");
    shown.forEach((s, i) => {
      const badge = s.status === "matched" ? null : el("span", { class: "badge " + s.status, text: s.status });
      const row = el("tr", { class: "site", "data-status": s.status }, [
        el("td", { class: "n", text: String(i + 1) }), el("td", { class: "f" }, [s.allocating_function, badge]),
        ...figureCells({ isBytes }, s.cost)]);
      row.addEventListener("click", () => {
        if (row.nextSibling && row.nextSibling.classList.contains("stack")) { row.nextSibling.remove(); return; }
        const list = el("ol", { class: "frames" }, s.frames.length ? s.frames.map(frameItem) : [el("li", { text: "no frames" })]);
        row.after(el("tr", { class: "stack" }, [el("td", { colspan: String(headers.length) }, [list])]));
      });
      body.append(row);
    });
    box.append(el("p", { class: "note", text: "The " + integer.format(sites.top.length) + " largest changes of " +
      COST_TITLES[by] + " (at most " + data.sites_limit + "; `memtrack diff --by COST` ranks by another cost). " +
      "Click a row for its call path (the head's; the base's for a gone one)." }));
    box.append(el("table", { id: "sites-table" }, [el("thead", null, [headerRow(headers, [1, 0, 1, 1, 1, 1])]), body]));
  }

  // ---- differential flame graph ----
  // Nodes: {frame, base: [costs], head: [costs], children, parent}; frames: [label, file, module].
  const frames = data.frames;
  function inflate(raw, parent) {
    const node = { frame: raw[0], base: raw[1], head: raw[2], children: [], parent };
    for (const c of raw[3]) node.children.push(inflate(c, node));
    return node;
  }
  const trees = {};
  const state = { cost: data.by, side: "head", direction: "top-down", zoom: null };
  function tree() {
    if (!trees[state.direction]) trees[state.direction] = inflate(data.trees[state.direction], null);
    return trees[state.direction];
  }
  const canvas = document.getElementById("flame");
  // Red for growth, blue for shrinkage, by the change over the larger side.
  function colorOf(node, ci) {
    const b = node.base[ci], h = node.head[ci];
    if (frames[node.frame][0].startsWith("[")) return "#c9ced4";
    const scale = Math.max(b, h);
    const r = scale > 0 ? (h - b) / scale : 0;
    if (r === 0) return "hsl(35, 10%, 80%)";
    return (r > 0 ? "hsl(0," : "hsl(215,") + Math.round(45 + 40 * Math.abs(r)) + "%," + Math.round(82 - 22 * Math.abs(r)) + "%)";
  }
  const drawing = { ci: 0, grown: 0, shrunk: 0, vanished: 0 };  // of the drawFlame under way
  const icicle = memtrackIcicle(canvas, document.getElementById("tooltip"), {
    weight: node => node[state.side][drawing.ci],
    label: node => frames[node.frame][0],
    paint(node) {
      const b = node.base[drawing.ci], h = node.head[drawing.ci];
      if (h > b) drawing.grown++;
      if (h < b) drawing.shrunk++;
      if (h === 0 && b > 0) drawing.vanished++;
      return [colorOf(node, drawing.ci), "#1d2125"];
    },
    describe,
    zoom(node) { state.zoom = node; drawFlame(); },
  });
  function drawFlame() {
    const ci = data.costs.indexOf(state.cost);
    const root = tree();
    const zoom = state.zoom || root;
    Object.assign(drawing, { ci, grown: 0, shrunk: 0, vanished: 0 });
    const drawn = icicle.draw(root, zoom);
    canvas.dataset.baseTotal = String(root.base[ci]);
    canvas.dataset.headTotal = String(root.head[ci]);
    canvas.dataset.drawn = String(drawn);
    canvas.dataset.grown = String(drawing.grown);
    canvas.dataset.shrunk = String(drawing.shrunk);
    canvas.dataset.vanished = String(drawing.vanished);
    const c = { base: root.base[ci], head: root.head[ci], change: root.head[ci] - root.base[ci],
                relative_percent: root.base[ci] ? 100 * (root.head[ci] - root.base[ci]) / root.base[ci] : null };
    let line = "All call paths, " + COST_TITLES[state.cost] + ": " + costText(state.cost, c.base) + " -> " +
      costText(state.cost, c.head) + " (" + (change(BYTE_COSTS.has(state.cost), c) || "0") + ")";
    if (zoom !== root) line += "; zoomed on " + frames[zoom.frame][0];
    document.getElementById("flame-status").textContent = line;
    const pruned = data.pruned_nodes[state.direction];
    document.getElementById("flame-note").textContent = "Widths are the " + state.side + "'s " + COST_TITLES[state.cost] +
      "; colour: red grew, blue shrank (deeper: a larger share of the frame's cost), grey unchanged. A call path gone " +
      "from the head has no width there: show the base's widths to see it. Frames merge by function. Click a frame to zoom. " +
      (pruned ? integer.format(pruned) + " subtrees below " + data.prune_percent +
       " % of the total in every cost of both runs are merged into [other] nodes." : "Every call path is shown.");
  }
  function describe(node) {
    const f = frames[node.frame];
    let text = f[0] + (f[1] ? "\n" + f[1] : "") + (f[2] ? "\nmodule: " + f[2] : "");
    data.costs.forEach((cost, i) => {
      const c = { base: node.base[i], head: node.head[i], change: node.head[i] - node.base[i],
                  relative_percent: node.base[i] ? 100 * (node.head[i] - node.base[i]) / node.base[i] : null };
      text += "\n" + (cost === state.cost ? "\u25b8 " : "  ") + COST_TITLES[cost] + ": " + costText(cost, c.base) + " -> " +
              costText(cost, c.head) + " " + (change(BYTE_COSTS.has(cost), c) || "0") + (relative(c) ? " " + relative(c) : "");
    });
    return text;
  }

  // ---- wiring ----
  renderRuns();
  renderBudgets();
  renderTotals();
  const figureSelect = document.getElementById("process-figure");
  for (const f of FIGURES) figureSelect.append(el("option", { value: f.name, text: f.title }));
  figureSelect.value = "allocated";
  figureSelect.addEventListener("change", () => renderProcesses(figureSelect.value));
  renderProcesses(figureSelect.value);
  let siteStatus = "all";
  for (const radio of document.querySelectorAll("input[name=status]"))
    radio.addEventListener("change", () => { siteStatus = radio.value; renderSites(siteStatus); });
  renderSites(siteStatus);
  if (!data.trees) {
    for (const id of ["flame-controls", "flame-wrap", "flame-legend"]) document.getElementById(id).hidden = true;
    document.getElementById("flame-status").textContent = single ? "One recording: `memtrack report --format html` draws its flame graph." :
      "No differential flame graph: both recordings need call paths (recorded without --no-stacks).";
  } else {
    const select = document.getElementById("cost");
    for (const c of data.costs) select.append(el("option", { value: c, text: COST_TITLES[c] }));
    select.value = state.cost;
    select.addEventListener("change", () => { state.cost = select.value; drawFlame(); });
    for (const radio of document.querySelectorAll("input[name=side]"))
      radio.addEventListener("change", () => { state.side = radio.value; drawFlame(); });
    for (const radio of document.querySelectorAll("input[name=direction]"))
      radio.addEventListener("change", () => { state.direction = radio.value; state.zoom = null; drawFlame(); });
    document.getElementById("reset-zoom").addEventListener("click", () => { state.zoom = null; drawFlame(); });
    window.addEventListener("resize", drawFlame);
    drawFlame();
  }
  performance.mark("memtrack-interactive");
  document.documentElement.dataset.ready = "1";
})();

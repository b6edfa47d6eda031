// memtrack's HTML report page. Reads the JSON data embedded in the page
// (html_report.cpp) and draws it: summary, memory over time, a canvas
// icicle of the call paths, and the tables. Every name from the recording
// goes into the page as text (textContent, canvas fillText), never as markup.
"use strict";
(function () {
  performance.mark("memtrack-start");
  const data = JSON.parse(document.getElementById("memtrack-data").textContent);
  const report = data.report;
  const profile = report.profile || null;
  const COST_TITLES = {
    bytes: "bytes allocated", count: "allocations",
    peak: profile && profile.live_at_ns != null ? "bytes live at " + profile.live_at_ns / 1e9 + " s" : "bytes live at the peak",
    leaked: "bytes leaked", live_at_end: "bytes live at the end of the recording", temporary: "temporary allocations",
  };
  const BYTE_COSTS = new Set(["bytes", "peak", "leaked", "live_at_end"]);
  // Processes the recording ended before: their blocks are live at end, not leaks.
  const runningAtEnd = report.processes.some(p => p.running_at_end);
  // The costs offered (weights, table columns): live at end only where there is such a process.
  const shownCosts = data.costs.filter(c => c !== "live_at_end" || runningAtEnd);
  const frames = data.frames;  // [label, file, line, module, inlined]
  const state = { cost: data.by, direction: "top-down", zoom: null, search: "" };

  // ---- formatting ----
  // Thousands separated by commas, as en-US writes them; by hand, as Intl.NumberFormat's first use
  // loads locale data (80-370 ms of the page's start-up at a load of 13 on this machine's 2 CPUs).
  const integer = { format: n => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",") };
  function bytes(n) {
    if (n === null || n === undefined) return "unknown";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let value = n, unit = 0;
    while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit++; }
    return unit === 0 ? integer.format(n) + " B" : value.toFixed(2) + " " + units[unit];
  }
  function seconds(ns) { return ns === null || ns === undefined ? "unknown" : (ns / 1e9).toFixed(3) + " s"; }
  function costText(cost, n) { return BYTE_COSTS.has(cost) ? bytes(n) : integer.format(n); }
  function percent(part, whole) { return whole > 0 ? (100 * part / whole).toFixed(1) + " %" : "–"; }

  const el = memtrackElement;
  function table(headers, rows, numeric) {
    const head = el("tr", null, headers.map((h, i) => el("th", { text: h, class: numeric[i] ? "n" : "" })));
    const body = rows.map(r => el("tr", null, r.map((c, i) => el("td", { text: String(c), class: numeric[i] ? "n" : "" }))));
    return el("table", null, [el("thead", null, [head]), el("tbody", null, body)]);
  }

  // ---- summary ----
  function renderSummary() {
    const t = report.totals;
    document.getElementById("command").textContent = t.command || "(command unknown)";
    const cards = [
      ["Duration", seconds(t.duration_ns), integer.format(report.events) + " records"],
      ["Peak heap", bytes(t.peak_memory), t.peak_time_ns === null ? "" : "at " + seconds(t.peak_time_ns)],
      timeline && timeline.total && timeline.total.has_rss
        ? ["Peak RSS", bytes(timeline.total.peaks.rss.bytes), timeline.total.peaks.rss.time_ns === null ? "" :
           "at " + seconds(timeline.total.peaks.rss.time_ns)]
        : ["Peak RSS", "not recorded", ""],
      ["Total allocated", bytes(t.total_allocated), integer.format(t.total_allocated) + " B"],
      ["Allocation calls", integer.format(t.alloc_calls), integer.format(t.free_calls) + " frees" +
       (report.attached || t.frees_of_earlier_blocks > 0
         ? ", " + integer.format(t.frees_of_earlier_blocks) + " of blocks allocated before the recording" : "")],
      ["Leaked", bytes(t.leaked_bytes), integer.format(t.leaked_count) + " blocks"],
      ...(runningAtEnd ? [["Live at end", bytes(t.live_at_end_bytes), integer.format(t.live_at_end_count) + " blocks, not leaks"]] : []),
      ["Temporary allocations", integer.format(t.temporary_allocations), percent(t.temporary_allocations, t.alloc_calls) + " of calls"],
      ["Lost events", report.lost_events === null ? "unknown" : integer.format(report.lost_events),
       report.lost_events === null ? "recording not finalized" : ""],
      ["Exit status", t.exit_code !== null ? String(t.exit_code) : report.attached && report.lost_events !== null
        ? "none" : "unknown", t.exit_code === null && report.attached ? "the process ran on after the recording" : ""],
    ];
    const box = document.getElementById("summary");
    for (const [k, v, s] of cards)
      box.append(el("div", { class: "card" }, [el("div", { class: "k", text: k }), el("div", { class: "v", text: v }),
                                               el("div", { class: "s", text: s })]));
    const alerts = document.getElementById("alerts");
    if (report.lost_events === null)
      alerts.append(el("div", { class: "alert", text: "The recording was not finalized: lost events are unknown." }));
    else if (report.lost_events > 0)
      alerts.append(el("div", { class: "alert", text: integer.format(report.lost_events) +
        " events were lost: the figures below miss them (see the recorder counters)." }));
    for (const limit of report.recording_limits) alerts.append(el("div", { class: "note", text: "Cannot know: " + limit }));
    for (const w of report.warnings.concat(profile ? profile.warnings : []))
      alerts.append(el("div", { class: "warn", text: w }));
    if (profile && profile.filter_note) alerts.append(el("div", { class: "warn", text: profile.filter_note }));
    const rows = report.processes.map(p => [p.pid, p.parent_pid === null ? "" : p.parent_pid, p.command || p.exe,
      integer.format(p.alloc_calls), bytes(p.total_allocated), bytes(p.peak_memory), bytes(p.leaked_bytes),
      ...(runningAtEnd ? [bytes(p.live_at_end_bytes)] : []),
      integer.format(p.temporary_allocations), seconds(p.duration_ns),
      p.exit_code !== null ? p.exit_code : p.running_at_end ? "running" : ""]);
    document.getElementById("processes").append(table(
      ["pid", "parent", "command", "calls", "allocated", "peak", "leaked", ...(runningAtEnd ? ["live at end"] : []),
       "temporary", "duration", "exit"], rows,
      [1, 1, 0, 1, 1, 1, 1, ...(runningAtEnd ? [1] : []), 1, 1, 1]));
  }

  // ---- memory over time ----
  // report.timeline (the JSON report's, docs/REPORT.md): per bucket, the
  // minimum, maximum and last value of each series, in total and per
  // process; null without one. Drawn: heap, RSS and mapped bytes as min/max
  // bands under their max envelope (a peak is never smoothed away), the
  // exact peaks marked and labelled. Dragging over the chart selects a
  // window: with data.window (each call path's allocations per slice of
  // time) the flame graph and the tables then count only the allocations
  // made in it.
  const timeline = report.timeline || null;
  const win = data.has_stacks && data.window ? data.window : null;
  // The selected window, in slices of win.slice_ns (or in buckets of the
  // total without data.window), both ends included; null: the whole recording.
  state.window = null;
  // memtrack_rss: memtrack's own pages in the program (its interposer's
  // events and call paths), which the RSS leaves out; hidden at first.
  const SERIES_TITLES = { heap: "heap (live bytes)", rss: "RSS", mapped: "mapped by the program",
                          memtrack_rss: "memtrack's own RSS" };
  const SERIES_COLORS = { heap: "#2463a6", rss: "#d1495b", mapped: "#66a182", memtrack_rss: "#8d6a9f" };

  // The window's [from, to] in ns since the recording's start, to inclusive.
  function windowRange(w) {
    const step = win ? win.slice_ns : timeline.total.bucket_ns;
    const origin = timeline.from_ns || 0;
    return [origin + w.lo * step, origin + (w.hi + 1) * step - 1];
  }
  // The command that reports just window w; `options` go before the file.
  function windowCommand(w, options) {
    const [from, to] = windowRange(w);
    return "memtrack report --from " + (from / 1e9).toFixed(9) + " --to " + (to / 1e9).toFixed(9) +
      (options ? " " + options : "") + " FILE";
  }

  function renderTimeline() {
    const box = document.getElementById("timeline");
    const total = timeline && timeline.total;
    if (!total || !total.buckets || !total.buckets.start_ns || !total.buckets.start_ns.length) {
      box.append(el("p", { class: "note", text: "No timeline in this recording." }));
      return;
    }
    document.getElementById("timeline-controls").hidden = false;
    const chooser = document.getElementById("timeline-process");
    chooser.append(el("option", { value: "total", text: "all processes" }));
    (timeline.processes || []).forEach((p, i) => {
      const proc = report.processes.find(q => q.pid === p.pid);
      chooser.append(el("option", { value: String(i), text: "pid " + p.pid + (proc && proc.command ? " " + proc.command : "") }));
    });
    const status = el("div", { class: "status", id: "timeline-window" });
    const chart = el("div", { id: "timeline-chart" });
    box.append(chart, el("p", { class: "note", text: "Drag over the chart to select a window of time; click a series in " +
      "the legend to hide or show it." }), status);
    const t0 = timeline.from_ns || 0;
    const totalEnd = total.buckets.start_ns[total.buckets.start_ns.length - 1] + (total.bucket_ns || 1);
    const t1 = Math.max(totalEnd, t0 + 1);
    const W = 1000, H = 240, L = 70, B = 22, R = 10, TOP = 30;
    const x = t => L + (W - L - R) * (t - t0) / (t1 - t0);
    const step = win ? win.slice_ns : (total.bucket_ns || 1);
    const stepAt = t => Math.max(0, Math.floor((t - t0) / step));
    const lastStep = stepAt(t1 - 1);
    let svg = null, brush = null;

    const hiddenSeries = new Set(["memtrack_rss"]);  // clicked off in the legend (RSS dwarfs a small heap)
    let shownNow = total;
    function draw(shown) {
      shownNow = shown;
      const columns = shown.buckets, starts = columns.start_ns, width = shown.bucket_ns || 1;
      const available = ["heap"].concat(shown.has_rss ? ["rss"] : [], shown.has_mapped ? ["mapped"] : [],
                                        shown.has_own ? ["memtrack_rss"] : []);
      const names = available.filter(n => !hiddenSeries.has(n));
      let top = 1;
      for (const n of names) for (const v of columns[n + "_max"]) top = Math.max(top, v);
      const y = v => H - B - (H - B - TOP) * v / top;
      const ns = "http://www.w3.org/2000/svg";
      svg = document.createElementNS(ns, "svg");
      svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
      svg.setAttribute("width", "100%");
      const svgEl = (tag, attrs, text) => {
        const node = document.createElementNS(ns, tag);
        for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
        if (text !== undefined) node.textContent = text;
        svg.append(node);
        return node;
      };
      available.forEach((n, i) => {
        const peak = shown.peaks && shown.peaks[n];
        const legend = svgEl("text", { x: L + 8 + 230 * i, y: 11, class: "legend", style: "cursor:pointer;fill:" + SERIES_COLORS[n] +
                                       (hiddenSeries.has(n) ? ";opacity:0.4" : "") },
                             (hiddenSeries.has(n) ? "□ " : "■ ") + SERIES_TITLES[n] + (peak ? ", peak " + bytes(peak.bytes) : ""));
        legend.addEventListener("click", () => {
          if (hiddenSeries.has(n)) hiddenSeries.delete(n); else hiddenSeries.add(n);
          draw(shownNow);
        });
      });
      names.forEach((n, i) => {
        const min = columns[n + "_min"], max = columns[n + "_max"];
        let envelope = "", band = "";
        starts.forEach((t, j) => {
          const seg = x(t).toFixed(1) + "," + y(max[j]).toFixed(1) + "L" + x(t + width).toFixed(1) + "," + y(max[j]).toFixed(1);
          envelope += (j ? "L" : "M") + seg;
        });
        band = envelope;
        for (let j = starts.length - 1; j >= 0; j--)
          band += "L" + x(starts[j] + width).toFixed(1) + "," + y(min[j]).toFixed(1) + "L" + x(starts[j]).toFixed(1) + "," + y(min[j]).toFixed(1);
        svgEl("path", { d: band + "Z", fill: SERIES_COLORS[n], "fill-opacity": "0.25", stroke: "none" });
        svgEl("path", { d: envelope, fill: "none", stroke: SERIES_COLORS[n], "stroke-width": "1.5", class: "envelope-" + n });
      });
      svgEl("text", { x: 2, y: y(0) + 4 }, "0");
      svgEl("text", { x: 2, y: y(top) + 4 }, bytes(top));
      svgEl("text", { x: L, y: H - 4 }, seconds(t0));
      svgEl("text", { x: W - 70, y: H - 4 }, seconds(t1));
      // The exact peaks (not the buckets'), each marked and labelled.
      names.forEach((n, i) => {
        const peak = shown.peaks && shown.peaks[n];
        if (!peak || peak.time_ns === null || peak.time_ns === undefined) return;
        const px = x(peak.time_ns);
        svgEl("line", { x1: px, x2: px, y1: TOP - 8 + 10 * i, y2: H - B, stroke: SERIES_COLORS[n], "stroke-dasharray": "4 3",
                        class: "peak-" + n });
        const text = n + " peak " + bytes(peak.bytes) + " at " + seconds(peak.time_ns);
        const right = px > W - 260;
        svgEl("text", { x: right ? px - 4 : px + 4, y: TOP - 4 + 10 * i, "text-anchor": right ? "end" : "start",
                        style: "fill:" + SERIES_COLORS[n], class: "peak-label" }, text);
      });
      brush = svgEl("rect", { x: 0, y: TOP - 10, width: 0, height: H - B - TOP + 10, fill: "#2463a6", "fill-opacity": "0.12" });
      svg.addEventListener("mousedown", e => { dragFrom = stepOf(e); select(dragFrom, dragFrom, false); e.preventDefault(); });
      svg.addEventListener("mousemove", e => { if (dragFrom !== null) select(dragFrom, stepOf(e), false); });
      chart.replaceChildren(svg);
      showBrush();
    }
    function stepOf(e) {
      const r = svg.getBoundingClientRect();
      const vx = (e.clientX - r.left) * W / r.width;
      const t = t0 + (vx - L) * (t1 - t0) / (W - L - R);
      return Math.min(lastStep, stepAt(Math.min(t1 - 1, Math.max(t0, t))));
    }
    function showBrush() {
      if (!selection) { brush.setAttribute("width", 0); return; }
      const [from, to] = windowRange(selection);
      brush.setAttribute("x", x(from));
      brush.setAttribute("width", Math.max(x(to + 1) - x(from), 1));
    }
    let dragFrom = null;
    let selection = null;  // what the brush shows; state.window once applied
    // Selects steps a..b; `apply` refilters the page (at the end of a drag).
    function select(a, b, apply) {
      selection = { lo: Math.min(a, b), hi: Math.max(a, b) };
      showBrush();
      const [from, to] = windowRange(selection);
      status.dataset.fromNs = String(from);
      status.dataset.toNs = String(to);
      let line = "Window " + seconds(from) + " – " + seconds(to + 1) + ": ";
      if (win) {
        line += "the flame graph and the tables count the allocations made in it (the window snaps to steps of " +
          seconds(win.slice_ns) + ").";
      } else {
        let calls = 0, allocated = 0;
        const c = total.buckets;
        c.start_ns.forEach((t, j) => { if (t + total.bucket_ns > from && t <= to) { calls += c.allocations[j]; allocated += c.allocated_bytes[j]; } });
        line += integer.format(calls) + " allocations, " + bytes(allocated) + " allocated.";
      }
      status.textContent = line + " Its own report: " + windowCommand(selection, "--format html -o window.html");
      document.getElementById("timeline-clear").disabled = false;
      if (apply) { state.window = selection; windowChanged(); }
    }
    window.addEventListener("mouseup", () => {
      if (dragFrom === null) return;
      dragFrom = null;
      state.window = selection;
      windowChanged();
    });
    document.getElementById("timeline-clear").addEventListener("click", () => {
      selection = state.window = null;
      showBrush();
      status.textContent = "";
      delete status.dataset.fromNs;
      delete status.dataset.toNs;
      document.getElementById("timeline-clear").disabled = true;
      windowChanged();
    });
    const peak = total.peaks && total.peaks.heap;
    const peakButton = document.getElementById("timeline-peak");
    if (!peak || peak.time_ns === null || peak.time_ns === undefined) peakButton.disabled = true;
    else peakButton.addEventListener("click", () => {
      const at = Math.min(lastStep, stepAt(peak.time_ns));
      select(at, at, true);
      document.getElementById("timeline-section").scrollIntoView();
    });
    chooser.addEventListener("change", () => draw(chooser.value === "total" ? total : timeline.processes[Number(chooser.value)]));
    draw(total);
  }

  // ---- the call trees ----
  // Each node: {frame, costs, children, parent, depth}, and `win`, its
  // bytes and allocations made in the selected window. Nodes are numbered
  // depth first, a node before its children, as memtrack wrote them
  // (data.window refers to them by number).
  function inflate(raw, parent, byId) {
    const node = { frame: raw[0], costs: raw[1], children: [], parent, depth: parent ? parent.depth + 1 : 0, win: null };
    byId.push(node);
    for (const c of raw[2]) node.children.push(inflate(c, node, byId));
    return node;
  }
  const trees = {};
  function treeOf(direction) {
    if (!trees[direction]) {
      const byId = [];
      trees[direction] = { root: inflate(data.trees[direction], null, byId), byId };
      if (state.window && win) windowCosts(trees[direction], win[direction]);
    }
    return trees[direction];
  }
  const tree = () => treeOf(state.direction).root;
  const costIndex = () => data.costs.indexOf(state.cost);
  const label = node => frames[node.frame][0];

  // ---- the selected window ----
  // Only allocations and their bytes are made at a time; the other costs
  // (peak, leaked, live at end, temporary) depend on what came after, so they are not
  // filtered by a window and say so.
  const WINDOWED = new Set(["bytes", "count"]);
  const windowed = cost => state.window !== null && win !== null && WINDOWED.has(cost);
  // [bytes, allocations] of the slices lo..hi of a [slice, count, bytes, ...] list.
  function sumSlices(flat) {
    let count = 0, allocated = 0;
    for (let i = 0; i < flat.length; i += 3)
      if (flat[i] >= state.window.lo && flat[i] <= state.window.hi) { count += flat[i + 1]; allocated += flat[i + 2]; }
    return [allocated, count];
  }
  // Each group holds the call paths ending at one node: added to it and every node above it.
  function windowCosts(t, groups) {
    for (const node of t.byId) node.win = [0, 0];
    for (const [id, flat] of groups) {
      const [allocated, count] = sumSlices(flat);
      if (!allocated && !count) continue;
      for (let n = t.byId[id]; n; n = n.parent) { n.win[0] += allocated; n.win[1] += count; }
    }
  }
  // A node's (or a listed call path's) cost ci, in the window when it can be.
  function value(node, ci) {
    const cost = data.costs[ci];
    return windowed(cost) ? node.win[cost === "bytes" ? 0 : 1] : node.costs[ci];
  }
  function windowChanged() {
    if (win) {
      for (const direction of Object.keys(trees)) if (state.window) windowCosts(trees[direction], win[direction]);
      data.sites.forEach((site, i) => { site.win = state.window ? sumSlices(win.sites[i]) : null; });
    }
    state.zoom = null;
    if (data.has_stacks) drawFlame();
    if (sites) sites.refresh();
    if (leaks) leaks.refresh();
    if (liveAtEnd) liveAtEnd.refresh();
  }

  function matches(node, text) {
    if (!text) return false;
    const f = frames[node.frame];
    return f[0].toLowerCase().includes(text) || f[1].toLowerCase().includes(text) || f[3].toLowerCase().includes(text);
  }
  // The cost of the frames matching the search under root, each path counted once.
  function matchedTotal(root, text, ci) {
    let total = 0;
    (function walk(node) {
      if (matches(node, text)) { total += value(node, ci); return; }
      for (const c of node.children) walk(c);
    })(root);
    return total;
  }

  function colorOf(node) {
    const name = label(node);
    if (name.startsWith("[")) return "#c9ced4";
    let h = 0;
    for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    return "hsl(" + (10 + h % 45) + "," + (60 + h % 25) + "%," + (58 + (h >> 8) % 14) + "%)";
  }

  const canvas = document.getElementById("flame");
  const drawing = { ci: 0, text: "", highlighted: 0 };  // of the drawFlame under way
  const icicle = memtrackIcicle(canvas, document.getElementById("tooltip"), {
    weight: node => value(node, drawing.ci),
    label,
    paint(node) {
      const hit = matches(node, drawing.text);
      if (hit) drawing.highlighted++;
      return [state.search && !hit ? "#e4e7ea" : hit ? "#c2185b" : colorOf(node), hit ? "#fff" : "#1d2125"];
    },
    describe,
    zoom(node) { state.zoom = node; drawFlame(); },
  });

  function drawFlame() {
    const ci = costIndex();
    const root = tree();
    const zoom = state.zoom || root;
    const text = state.search.toLowerCase();
    Object.assign(drawing, { ci, text, highlighted: 0 });
    const drawn = icicle.draw(root, zoom);
    canvas.dataset.rootTotal = String(value(root, ci));
    canvas.dataset.highlighted = String(drawing.highlighted);
    canvas.dataset.drawn = String(drawn);
    const status = document.getElementById("flame-status");
    const scope = windowed(state.cost) ? "Call paths, allocations made in the window: " : "All call paths: ";
    let line = scope + costText(state.cost, value(root, ci)) + " " + COST_TITLES[state.cost];
    if (zoom !== root) line += "; zoomed on " + label(zoom) + ": " + costText(state.cost, value(zoom, ci)) +
                               " (" + percent(value(zoom, ci), value(root, ci)) + ")";
    if (text) {
      const m = matchedTotal(root, text, ci);
      line += "; matching \u201c" + state.search + "\u201d: " + costText(state.cost, m) + " (" + percent(m, value(root, ci)) + ")";
      status.dataset.matched = String(m);
    } else {
      delete status.dataset.matched;
    }
    status.textContent = line;
    const notice = document.getElementById("flame-window");
    notice.hidden = !state.window;
    notice.textContent = !state.window ? "" : !win
      ? "This page has no call paths over time: the flame graph shows the whole recording. For the window's: " + windowCommand(state.window)
      : windowed(state.cost) ? ""
      : COST_TITLES[state.cost] + " cannot be counted by the window from this page (it depends on what happened after " +
        "the allocations): the flame graph shows the whole recording. For the window's: " + windowCommand(state.window, "--by " + state.cost);
    notice.hidden = notice.textContent === "";
    const pruned = data.pruned_nodes[state.direction];
    document.getElementById("flame-note").textContent = "Click a frame to zoom in, a frame above it to zoom out. " +
      (pruned ? integer.format(pruned) + " subtrees below " + data.prune_percent +
       " % of the total in every cost are merged into [other] nodes (their sums are exact)." : "Every call path is shown.");
  }

  function describe(node) {
    const f = frames[node.frame];
    const root = tree();
    let text = f[0] + (f[4] ? "  [inlined]" : "");
    if (f[1]) text += "\n" + f[1] + (f[2] ? ":" + f[2] : "");
    if (f[3]) text += "\nmodule: " + f[3];
    shownCosts.forEach(c => {
      const i = data.costs.indexOf(c);
      text += "\n" + (c === state.cost ? "▸ " : "  ") + COST_TITLES[c] + ": " + costText(c, value(node, i)) +
              " (" + percent(value(node, i), value(root, i)) + ")" +
              (state.window && !windowed(c) ? ", whole recording" : windowed(c) ? ", in the window" : "");
    });
    if (f[0] === "[other]") text += "\ncall paths below " + data.prune_percent + " % of every cost, merged";
    return text;
  }

  // ---- tables ----
  function frameItem(index) {
    const f = frames[index];
    const loc = (f[1] ? " " + f[1] + (f[2] ? ":" + f[2] : "") : "") + (f[3] ? " (" + f[3] + ")" : "");
    return el("li", null, [f[0], f[4] ? el("span", { class: "inl", text: " inlined" }) : null,
                           el("span", { class: "loc", text: loc })]);
  }
  // Rows of call paths, each expanding to its frames; sortable by every cost.
  // With a window selected, allocations and bytes are those made in it.
  function sitesTable(container, sites, sortCost) {
    let sortBy = sortCost;
    function render() {
      container.replaceChildren();
      const headers = ["allocating function", "outcome"].concat(shownCosts.map(c =>
        COST_TITLES[c] + (state.window && win ? (windowed(c) ? " in the window" : " (whole recording)") : "")));
      const ci = data.costs.indexOf(sortBy);
      const sorted = sites.filter(s => value(s, ci) > 0).sort((a, b) => value(b, ci) - value(a, ci));
      const head = el("tr", null, headers.map((h, i) => {
        const th = el("th", { text: h, class: i >= 2 ? "n sortable" + (shownCosts[i - 2] === sortBy ? " sorted" : "") : "" });
        if (i >= 2) th.addEventListener("click", () => { sortBy = shownCosts[i - 2]; render(); });
        return th;
      }));
      const body = el("tbody");
      for (const site of sorted.slice(0, 200)) {
        const row = el("tr", { class: "site" }, [el("td", { class: "f", text: site.function }), el("td", { text: site.outcome })]
          .concat(shownCosts.map(c => el("td", { class: "n", text: costText(c, value(site, data.costs.indexOf(c))) }))));
        row.dataset.costs = JSON.stringify(shownCosts.map(c => value(site, data.costs.indexOf(c))));
        row.addEventListener("click", () => {
          if (row.nextSibling && row.nextSibling.classList.contains("stack")) { row.nextSibling.remove(); return; }
          const list = el("ol", { class: "frames" }, site.frames.length ? site.frames.map(frameItem) :
            [el("li", { text: "no call path recorded" })]);
          row.after(el("tr", { class: "stack" }, [el("td", { colspan: String(headers.length) }, [list])]));
        });
        body.append(row);
      }
      let note = sorted.length + " call paths with " + COST_TITLES[sortBy] + (windowed(sortBy) ? " in the window" : "") +
        (sorted.length > 200 ? ", the top 200 shown" : "") + "; click a row for its frames, a column to sort. The page holds the " +
        data.sites_per_cost + " costliest call paths of each cost (of " + integer.format(data.sites_with_cost) + ").";
      if (windowed(sortBy)) {
        // Call paths the page does not list may have allocated in the window too: the flame graph has them.
        const listed = sites.reduce((sum, s) => sum + value(s, ci), 0);
        const all = value(treeOf("top-down").root, ci);
        if (all > listed) note += " Call paths not listed here made " + costText(sortBy, all - listed) +
          " of the window's " + costText(sortBy, all) + " (in the flame graph; the window's own report lists them all).";
      }
      container.append(el("p", { class: "note", text: note }));
      container.append(el("table", null, [el("thead", null, [head]), body]));
    }
    render();
    return { sortBy: c => { sortBy = c; render(); }, refresh: render };
  }

  function renderTables() {
    if (!data.has_stacks) {
      for (const id of ["sites", "leaks", "live-at-end"])
        document.getElementById(id).append(el("p", { class: "note",
          text: "Recorded without call paths: record without `--no-stacks` (`memtrack record -- CMD`) to see where memory is allocated." }));
    }
    const sites = data.has_stacks ? sitesTable(document.getElementById("sites"), data.sites, state.cost) : null;
    // The tables of leaks and of blocks live at end are drawn when first
    // opened (a click on the summary, or `open` set): their rows would only
    // slow the page's start.
    const lazyTable = (id, cost) => {
      const box = document.getElementById(id);
      const ci = data.costs.indexOf(cost);
      let drawn = null;
      const show = () => { if (!drawn) drawn = sitesTable(box, data.sites.filter(s => s.costs[ci] > 0), cost); };
      if (data.has_stacks) {
        box.parentElement.addEventListener("toggle", show);
        box.parentElement.querySelector("summary").addEventListener("click", show);
      }
      return { refresh: () => { if (drawn) drawn.refresh(); } };
    };
    leaks = lazyTable("leaks", "leaked");
    document.getElementById("live-at-end").parentElement.hidden = !runningAtEnd;
    liveAtEnd = lazyTable("live-at-end", "live_at_end");
    if (profile) {
      const o = profile.stack_outcomes;
      document.getElementById("outcomes").append(table(["outcome", "call paths defined", "allocations"],
        Object.keys(o.definitions).map(k => [k, integer.format(o.definitions[k]), integer.format(o.allocations[k])]), [0, 1, 1]));
    }
    const counters = report.counters;
    document.getElementById("counters").append(counters ? table(["counter", "value"],
      Object.entries(counters).map(([k, v]) => [k, integer.format(v)]), [0, 1]) :
      el("p", { class: "note", text: "No counters: the recording was not finalized." }));
    return sites;
  }

  // ---- wiring ----
  // The flame graph is drawn before the tables are filled: its width forces
  // the page's first layout, which is then not a layout of their rows.
  let leaks = null, liveAtEnd = null, sites = null;
  renderSummary();
  renderTimeline();
  const select = document.getElementById("cost");
  for (const c of shownCosts) select.append(el("option", { value: c, text: COST_TITLES[c] }));
  select.value = state.cost;
  if (!data.has_stacks) {
    document.getElementById("flame-controls").hidden = true;
    document.getElementById("flame-wrap").hidden = true;
    document.getElementById("flame-status").textContent =
      "This recording has no call paths: record without `--no-stacks` (`memtrack record -- CMD`) for the flame graph and the call-path tables.";
  } else {
    select.addEventListener("change", () => { state.cost = select.value; drawFlame(); if (sites) sites.sortBy(state.cost); });
    for (const radio of document.querySelectorAll("input[name=direction]"))
      radio.addEventListener("change", () => { state.direction = radio.value; state.zoom = null; drawFlame(); });
    document.getElementById("search").addEventListener("input", e => { state.search = e.target.value.trim(); drawFlame(); });
    document.getElementById("reset-zoom").addEventListener("click", () => { state.zoom = null; drawFlame(); });
    window.addEventListener("resize", drawFlame);
    drawFlame();
  }
  sites = renderTables();
  performance.mark("memtrack-interactive");
  document.documentElement.dataset.ready = "1";
})();

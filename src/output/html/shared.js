// What memtrack's HTML pages share, the report's (page.js) and the diff's
// (diff.js); embed_html.cmake puts it before the page's own script: making
// elements, and the canvas icicle (flame graph). Names from the recordings
// go into elements and the tooltip as textContent and onto the canvas with
// fillText: never as markup.
"use strict";

// An element: attrs.text is its text, attrs.class its class, other attrs
// its attributes; children (null ones skipped) appended.
function memtrackElement(tag, attrs, children) {
  const node = document.createElement(tag);
  if (attrs) for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  if (children) for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

// The icicle. A node is {frame, children, parent, ...}; the page says how
// wide a node is, how it is painted, named and described.
// look: {weight(node), label(node), paint(node) -> [fill, text colour], describe(node), zoom(node)}
// zoom is called with the clicked node (null: the root was clicked).
function memtrackIcicle(canvas, tooltip, look) {
  const ROW = 18;
  let drawnRows = [];  // per depth: [{x, w, node}], left to right

  // Draws the subtree of zoom (the root when null) over the canvas's width,
  // its ancestors dimmed above it; returns how many frames were drawn.
  function draw(root, zoom) {
    zoom = zoom || root;
    const width = canvas.parentElement.clientWidth || 1000;
    const ancestors = [];
    for (let n = zoom.parent; n; n = n.parent) ancestors.unshift(n);
    // Rows the visible part needs: the ancestors, then the zoomed subtree down to where nodes are under a pixel.
    let depth = 0;
    (function measure(node, w, d) {
      depth = Math.max(depth, d);
      const whole = look.weight(node);
      if (!(whole > 0)) return;
      for (const c of node.children) {
        const cw = w * look.weight(c) / whole;
        if (cw >= 0.5) measure(c, cw, d + 1);
      }
    })(zoom, width, ancestors.length);
    const height = (depth + 1) * ROW;
    const ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    canvas.style.height = height + "px";
    const ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    ctx.font = "12px " + getComputedStyle(document.body).getPropertyValue("--mono");
    ctx.textBaseline = "middle";
    drawnRows = Array.from({ length: depth + 1 }, () => []);
    let drawn = 0;
    function box(node, x, w, d, dimmed) {
      drawn++;
      const [fill, ink] = look.paint(node);
      ctx.fillStyle = fill;
      if (dimmed) ctx.globalAlpha = 0.6;
      ctx.fillRect(x, d * ROW, Math.max(w - 0.5, 0.5), ROW - 1);
      ctx.globalAlpha = 1;
      if (w > 30) {
        ctx.fillStyle = ink;
        const chars = Math.floor((w - 6) / 7.2), name = look.label(node);
        ctx.fillText(name.length > chars ? name.slice(0, Math.max(chars - 1, 1)) + "\u2026" : name, x + 3, d * ROW + ROW / 2);
      }
      drawnRows[d].push({ x, w, node });
    }
    ancestors.forEach((a, d) => box(a, 0, width, d, true));
    (function paint(node, x, w, d) {
      box(node, x, w, d, false);
      const whole = look.weight(node);
      if (!(whole > 0)) return;
      let cx = x;
      for (const c of node.children) {
        const cw = w * look.weight(c) / whole;
        if (cw >= 0.5) paint(c, cx, cw, d + 1);
        cx += cw;
      }
    })(zoom, 0, width, ancestors.length);
    return drawn;
  }

  function nodeAt(event) {
    const rect = canvas.getBoundingClientRect();
    const x = event.clientX - rect.left, d = Math.floor((event.clientY - rect.top) / ROW);
    const row = drawnRows[d] || [];
    let lo = 0, hi = row.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (row[mid].x + row[mid].w < x) lo = mid + 1;
      else if (row[mid].x > x) hi = mid - 1;
      else return row[mid].node;
    }
    return null;
  }
  canvas.addEventListener("mousemove", e => {
    const node = nodeAt(e);
    if (!node) { tooltip.hidden = true; return; }
    tooltip.textContent = look.describe(node);
    tooltip.hidden = false;
    const wrap = canvas.parentElement.getBoundingClientRect();
    tooltip.style.left = Math.max(0, Math.min(e.clientX - wrap.left + 12, wrap.width - tooltip.offsetWidth - 4)) + "px";
    tooltip.style.top = (e.clientY - wrap.top + 14) + "px";
  });
  canvas.addEventListener("mouseleave", () => { tooltip.hidden = true; });
  canvas.addEventListener("click", e => {
    const node = nodeAt(e);
    if (node) look.zoom(node.parent ? node : null);
  });
  return { draw };
}

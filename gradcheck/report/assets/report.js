// gradcheck report: the table of all checks and the detail panel.
// Data comes from the JSON data block (id gc-data) via JSON.parse; every string is
// inserted with textContent (never parsed as markup); plots are SVG elements built node by node.
// State lives in the URL fragment, e.g.
// #q=tanh&status=failed&backend=torch&check=12 (shareable, and how tests drive the page).
(function () {
  "use strict";
  var t0 = performance.now();
  var data = JSON.parse(document.getElementById("gc-data").textContent);
  var S = data.strings, rows = data.rows, extra = data.extra, statuses = data.statuses;
  var shared = data.shared || [];
  var C = {};
  data.columns.forEach(function (name, i) { C[name] = i; });
  var byId = {};  // a row's id is its check's index in the stream (rows may leave some out)
  rows.forEach(function (r) { byId[String(r[C.id])] = r; });
  var STRCOLS = ["kind", "name", "backend", "device", "dtype", "test", "message", "reproducer",
    "subject", "shapes"];
  var FILTERS = ["status", "backend", "device", "dtype", "kind"];
  var state = {};
  var haystack = null;

  function num(v) {
    if (typeof v === "string") { return v === "inf" ? Infinity : (v === "-inf" ? -Infinity : NaN); }
    return v;
  }
  function str(row, col) { return S[row[C[col]]]; }
  function value(row, col) {
    if (col === "status") { return row[C.status]; }
    if (STRCOLS.indexOf(col) >= 0) { return str(row, col); }
    return num(row[C[col]]);
  }
  function fmt(v) {
    v = num(v);
    if (v === null || v === undefined) { return ""; }
    if (typeof v !== "number") { return String(v); }
    if (!isFinite(v)) { return String(v); }
    if (v === 0) { return "0"; }
    var a = Math.abs(v);
    return (a >= 1e-3 && a < 1e5) ? String(Number(v.toPrecision(4))) : v.toExponential(2);
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }

  // -- state <-> URL fragment ------------------------------------------------------------------
  // a hand-typed fragment need not be valid percent-encoding (#q=100%): keep such text as typed
  function decode(text) {
    try { return decodeURIComponent(text); } catch (e) { return text; }
  }
  function readHash() {
    state = { sort: "status", dir: 1, page: 0, size: 100 };
    var h = location.hash.replace(/^#/, "");
    if (!h) { return; }
    h.split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i < 0) { return; }
      var k = decode(kv.slice(0, i)), v = decode(kv.slice(i + 1));
      if (k === "page" || k === "size" || k === "dir") { state[k] = parseInt(v, 10) || 0; }
      else { state[k] = v; }
    });
    if (!state.size) { state.size = 100; }
    if (!state.dir) { state.dir = 1; }
  }
  function writeHash() {
    var parts = [];
    Object.keys(state).forEach(function (k) {
      var v = state[k];
      var dflt = { sort: "status", dir: 1, page: 0, size: 100 }[k];
      if (v === "" || v === undefined || v === null || v === dflt) { return; }
      parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(v));
    });
    history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname);
  }

  // -- filtering, sorting ----------------------------------------------------------------------
  function matches(row, i, terms) {
    for (var f = 0; f < FILTERS.length; f++) {
      var k = FILTERS[f], want = state[k];
      if (!want) { continue; }
      if (k === "status") {
        var s = statuses[row[C.status]];
        if (want === "not-ok" ? (s !== "failed" && s !== "error") : s !== want) { return false; }
      } else if (str(row, k) !== want) { return false; }
    }
    if (state.name && str(row, "name") !== state.name) { return false; }
    if (state.test && str(row, "test") !== state.test) { return false; }
    for (var t = 0; t < terms.length; t++) {
      if (haystack[i].indexOf(terms[t]) < 0) { return false; }
    }
    return true;
  }
  function buildHaystack() {
    haystack = rows.map(function (r) {
      return [str(r, "name"), str(r, "subject"), str(r, "kind"), str(r, "backend"),
        str(r, "device"), str(r, "dtype"), str(r, "test"), str(r, "message"),
        statuses[r[C.status]]].join(" ").toLowerCase();
    });
  }
  function compare(col, dir) {
    return function (a, b) {
      var x = value(a, col), y = value(b, col);
      var xn = x === null || x === undefined || (typeof x === "number" && isNaN(x));
      var yn = y === null || y === undefined || (typeof y === "number" && isNaN(y));
      if (xn || yn) { return xn === yn ? tie(a, b) : (xn ? 1 : -1); }
      if (x < y) { return -dir; }
      if (x > y) { return dir; }
      return tie(a, b);
    };
  }
  function tie(a, b) {  // worst first: highest ratio, then row order
    var ra = num(a[C.ratio]), rb = num(b[C.ratio]);
    ra = (ra === null || isNaN(ra)) ? -1 : ra;
    rb = (rb === null || isNaN(rb)) ? -1 : rb;
    return rb - ra || a[C.id] - b[C.id];
  }
  function filtered() {
    var q = (state.q || "").toLowerCase().split(/\s+/).filter(Boolean);
    if (q.length && !haystack) { buildHaystack(); }
    var out = [];
    for (var i = 0; i < rows.length; i++) {
      if (matches(rows[i], i, q)) { out.push(rows[i]); }
    }
    var col = C[state.sort] !== undefined ? state.sort : "status";
    out.sort(compare(col, state.dir === -1 ? -1 : 1));
    return out;
  }

  // -- rendering -------------------------------------------------------------------------------
  function badge(status) { return el("span", "badge s-" + status, status); }
  function renderTable() {
    var list = filtered();
    var size = state.size, pages = Math.max(1, Math.ceil(list.length / size));
    state.page = Math.min(Math.max(0, state.page), pages - 1);
    var start = state.page * size, body = document.getElementById("rows");
    var frag = document.createDocumentFragment();
    list.slice(start, start + size).forEach(function (r) {
      var tr = el("tr");
      tr.tabIndex = 0;
      tr.dataset.id = r[C.id];
      var td = el("td");
      td.appendChild(badge(statuses[r[C.status]]));
      tr.appendChild(td);
      ["name", "subject", "backend", "device", "dtype"].forEach(function (k) {
        tr.appendChild(el("td", null, str(r, k)));
      });
      ["ratio", "discrepancy", "allowed"].forEach(function (k) {
        tr.appendChild(el("td", "num", fmt(r[C[k]])));
      });
      tr.appendChild(el("td", "test", str(r, "test")));
      if (String(r[C.id]) === state.check) { tr.className = "selected"; }
      frag.appendChild(tr);
    });
    body.textContent = "";
    body.appendChild(frag);
    document.getElementById("count").textContent = list.length + " of " + rows.length +
      " checks" + (list.length ? " (showing " + (start + 1) + "-" +
      Math.min(start + size, list.length) + ")" : "");
    document.getElementById("page").textContent = "page " + (state.page + 1) + " of " + pages;
    document.getElementById("prev").disabled = state.page === 0;
    document.getElementById("next").disabled = state.page >= pages - 1;
    document.querySelectorAll("#checks-table th").forEach(function (th) {
      th.className = th.dataset.sort === state.sort ? (state.dir === -1 ? "desc" : "asc") : "";
    });
  }

  // what "actual" and "expected" are for each kind of comparison
  var SIDES = {
    fwd_rev: ["forward mode (actual)", "reverse mode (expected)"],
    eager_func: ["alternative path (actual)", "functional VJP (expected)"],
    rounding: ["low-precision VJP (actual)", "float64 VJP (expected)"],
    reference: ["AD (backend)", "NumPy reference (expected)"],
    cross_backend: ["AD (backend)", "other backend (expected)"],
    cross_device: ["AD (device)", "CPU (expected)"]
  };
  function exact(v) { return v === null || v === undefined ? "" : fmt(v) + "  [" + v + "]"; }
  function field(dl, label, v) {
    if (v === "" || v === null || v === undefined) { return; }
    dl.appendChild(el("dt", null, label));
    dl.appendChild(el("dd", null, v));
  }
  function renderDetail() {
    var aside = document.getElementById("detail");
    var id = state.check, row = null;
    if (id !== undefined && id !== "") { row = byId[String(parseInt(id, 10))] || null; }
    aside.textContent = "";
    if (!row) { aside.hidden = true; return; }
    var x = extra[String(row[C.id])] || {};
    var status = statuses[row[C.status]];
    var close = el("button", "close", "close");
    close.type = "button";
    close.addEventListener("click", function () { state.check = ""; update(); });
    aside.appendChild(close);
    var h = el("h2", null, str(row, "name") + ": " + str(row, "subject"));
    h.insertBefore(badge(status), h.firstChild);
    aside.appendChild(h);
    if (str(row, "message")) { aside.appendChild(el("p", "message", str(row, "message"))); }
    var dl = el("dl");
    field(dl, "compared", str(row, "subject") + " (" + str(row, "kind") + ")");
    var labels = SIDES[str(row, "kind")] || ["AD (backend)", "oracle (expected)"];
    // x.shown: the strings the assert message prints (gradcheck.core.results.shown)
    var sh = x.shown || {actual: exact(row[C.actual]), expected: exact(row[C.expected]),
      difference: fmt(row[C.discrepancy]), relative: fmt(x.relative),
      allowed: fmt(row[C.allowed]), ratio: fmt(row[C.ratio])};
    field(dl, labels[0], sh.actual);
    field(dl, labels[1], sh.expected);
    field(dl, "|AD - oracle|", sh.difference);
    field(dl, "relative", sh.relative);
    field(dl, "allowed", sh.allowed);
    field(dl, "allowed from", x.allowed_source);
    field(dl, "discrepancy ratio", sh.ratio);
    field(dl, "backend / device / dtype", str(row, "backend") + " / " + str(row, "device") +
      " / " + str(row, "dtype"));
    field(dl, "seed", row[C.seed]);
    field(dl, "input shapes", str(row, "shapes"));
    field(dl, "test", str(row, "test"));
    field(dl, "duration (s)", fmt(row[C.duration]));
    aside.appendChild(dl);
    if (x.worst && x.worst.length) {
      aside.appendChild(el("h3", null, "Worst elements (full Jacobian)"));
      var t = el("table", "grid"), tr = el("tr");
      ["index (out..., in...)", "AD", "oracle", "|diff|", "allowed", "ratio"].forEach(function (c) {
        tr.appendChild(el("th", null, c));
      });
      t.appendChild(tr);
      x.worst.forEach(function (w, i) {
        var r = el("tr"), d = Math.abs(num(w[1]) - num(w[2]));
        var cells = x.worst_shown && x.worst_shown[i] ? x.worst_shown[i] :
          [fmt(w[1]), fmt(w[2]), fmt(d), fmt(w[3]), fmt(d / num(w[3]))];
        [w[0].join(", ")].concat(cells)
          .forEach(function (c, k) { r.appendChild(el("td", k ? "num" : null, c)); });
        t.appendChild(r);
      });
      aside.appendChild(t);
    }
    if (x.convergence && x.convergence.length && status === "failed") {
      var svg = convergencePlot(x.convergence, num(row[C.expected]), num(row[C.actual]),
        num(row[C.allowed]));
      if (svg) {
        aside.appendChild(el("h3", null, "Finite-difference convergence"));
        aside.appendChild(svg);
      }
    }
    if (x.details && Object.keys(x.details).length) {
      aside.appendChild(el("h3", null, "Details"));
      var dd = el("dl");
      Object.keys(x.details).forEach(function (k) {
        var v = x.details[k];
        // evidence shared by several checks is stored once (data.shared)
        if (v && typeof v === "object" && typeof v.$shared === "number") { v = shared[v.$shared]; }
        field(dd, k, typeof v === "object" ? JSON.stringify(v) : v);
      });
      aside.appendChild(dd);
    }
    if (str(row, "reproducer")) {
      aside.appendChild(el("h3", null, "Reproduce"));
      var pre = el("pre", "repro", str(row, "reproducer"));
      var copy = el("button", null, "copy");
      copy.type = "button";
      copy.addEventListener("click", function () { copyText(pre); });
      aside.appendChild(copy);
      aside.appendChild(pre);
    }
    aside.hidden = false;
  }
  function copyText(pre) {
    var range = document.createRange();
    range.selectNodeContents(pre);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    if (navigator.clipboard) { navigator.clipboard.writeText(pre.textContent).catch(function () {}); }
  }

  // -- FD convergence plot (SVG built node by node: well-formed, no markup parsing) ----------
  // Left: central difference D(h) vs step h (log axis) with the oracle and AD values.
  // Right: |D(h) - oracle| vs h (log-log): truncation error falls as h^2 until rounding takes
  // over; lines mark |AD - oracle| and the allowed error.
  var SVGNS = "http://www.w3.org/2000/svg";
  var PW = 300, PH = 210, ML = 62, MR = 10, MT = 22, MB = 38;
  var COLORS = { fd: "#1f6feb", oracle: "#1a7f37", ad: "#cf222e", allowed: "#9a6700" };
  function svgEl(parent, tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) { e.textContent = text; }
    parent.appendChild(e);
    return e;
  }
  function r1(v) { return String(Math.round(v * 10) / 10); }
  function g3(v) {
    var a = Math.abs(v);
    return (a !== 0 && (a < 1e-3 || a >= 1e5)) ? v.toExponential(0) : String(Number(v.toPrecision(3)));
  }
  function niceTicks(lo, hi) {
    if (!(isFinite(lo) && isFinite(hi)) || hi <= lo) { return [lo]; }
    var raw = (hi - lo) / 5, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (m) { return m * mag; })
      .filter(function (s) { return s >= raw; })[0];
    var out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) { out.push(t); }
    return out;
  }
  function decadeTicks(lo, hi) {
    var out = [];
    for (var t = Math.ceil(lo - 1e-9); t <= Math.floor(hi + 1e-9); t++) { out.push(t); }
    if (!out.length) { out.push((lo + hi) / 2); }  // no power of ten in range: the middle
    var stride = Math.max(1, Math.ceil(out.length / 6));
    return out.filter(function (_, i) { return i % stride === 0; });
  }
  function padded(values) {
    var f = values.filter(isFinite);
    if (!f.length) { return [0, 1]; }
    var lo = Math.min.apply(null, f), hi = Math.max.apply(null, f);
    var pad = (hi - lo) * 0.08 || (Math.abs(hi) * 0.01 || 1);
    return [lo - pad, hi + pad];
  }
  function panel(svg, x0, xlim, ylim, title, ylog) {
    var W = PW - ML - MR, H = PH - MT - MB;
    var p = {
      px: function (x) { return x0 + ML + (x - xlim[0]) / ((xlim[1] - xlim[0]) || 1) * W; },
      py: function (y) { return MT + (ylim[1] - y) / ((ylim[1] - ylim[0]) || 1) * H; }
    };
    var left = p.px(xlim[0]), right = p.px(xlim[1]), bottom = PH - MB;
    svgEl(svg, "rect", { x: r1(left), y: MT, width: r1(right - left), height: H, fill: "#ffffff",
      stroke: "#8c959f" });
    var yt = ylog ? decadeTicks(ylim[0], ylim[1]) : niceTicks(ylim[0], ylim[1]);
    var digits = 3;
    if (!ylog && yt.length > 1) {
      var top = Math.max.apply(null, yt.map(Math.abs)) || 1;
      digits = Math.min(15, Math.max(3, Math.ceil(Math.log10(top / Math.abs(yt[1] - yt[0]))) + 1));
    }
    yt.forEach(function (t) {
      var y = r1(p.py(t));
      svgEl(svg, "line", { x1: r1(left), y1: y, x2: r1(right), y2: y, stroke: "#eaeef2" });
      svgEl(svg, "text", { x: r1(left - 4), y: r1(p.py(t) + 3), "text-anchor": "end" },
        ylog ? g3(Math.pow(10, t)) : String(Number(t.toPrecision(digits))));
    });
    decadeTicks(xlim[0], xlim[1]).forEach(function (t) {
      var x = r1(p.px(t));
      svgEl(svg, "line", { x1: x, y1: bottom, x2: x, y2: bottom + 4, stroke: "#57606a" });
      svgEl(svg, "text", { x: x, y: bottom + 15, "text-anchor": "middle" }, g3(Math.pow(10, t)));
    });
    var cx = r1((left + right) / 2);
    svgEl(svg, "text", { x: cx, y: PH - 6, "text-anchor": "middle" }, "step h");
    svgEl(svg, "text", { x: cx, y: 14, "text-anchor": "middle", "font-weight": "bold" }, title);
    p.hline = function (y, color, label, dash) {
      if (!(isFinite(y) && y >= ylim[0] && y <= ylim[1])) { return; }
      var a = { x1: r1(left), y1: r1(p.py(y)), x2: r1(right), y2: r1(p.py(y)), stroke: color,
        "stroke-width": "1.5" };
      if (dash) { a["stroke-dasharray"] = dash; }
      svgEl(svg, "line", a);
      svgEl(svg, "text", { x: r1(right - 3), y: r1(p.py(y) - 3), "text-anchor": "end",
        fill: color }, label);
    };
    p.curve = function (xs, ys, color) {
      var pts = [];
      xs.forEach(function (x, i) {
        if (isFinite(x) && isFinite(ys[i])) { pts.push([p.px(x), p.py(ys[i])]); }
      });
      if (!pts.length) { return; }
      svgEl(svg, "polyline", { points: pts.map(function (q) { return r1(q[0]) + "," + r1(q[1]); })
        .join(" "), fill: "none", stroke: color, "stroke-width": "1.5" });
      pts.forEach(function (q) {
        svgEl(svg, "circle", { cx: r1(q[0]), cy: r1(q[1]), r: "2.5", fill: color });
      });
    };
    return p;
  }
  function convergencePlot(points, expected, actual, allowed) {
    var pts = points.map(function (q) { return [num(q[0]), num(q[1])]; })
      .filter(function (q) { return q[0] > 0 && isFinite(q[0]) && isFinite(q[1]); });
    if (!pts.length) { return null; }
    var lx = pts.map(function (q) { return Math.log10(q[0]); });
    var xlim = [Math.min.apply(null, lx) - 0.1, Math.max.apply(null, lx) + 0.1];
    var haveOracle = typeof expected === "number" && isFinite(expected);
    var width = haveOracle ? 2 * PW : PW;
    var svg = document.createElementNS(SVGNS, "svg");
    [["width", width], ["height", PH], ["viewBox", "0 0 " + width + " " + PH],
      ["font-family", "sans-serif"], ["font-size", "10"], ["role", "img"], ["class", "conv"]]
      .forEach(function (a) { svg.setAttribute(a[0], String(a[1])); });
    svgEl(svg, "title", {}, "FD convergence: " + pts.length + " steps; oracle " + expected +
      ", AD " + actual + ", allowed " + allowed);
    var ys = pts.map(function (q) { return q[1]; });
    var left = panel(svg, 0, xlim, padded(ys.concat([expected, actual])), "FD estimate vs step",
      false);
    if (haveOracle) { left.hline(expected, COLORS.oracle, "oracle", "5,3"); }
    left.hline(actual, COLORS.ad, "AD");
    left.curve(lx, ys, COLORS.fd);
    if (haveOracle) {
      var lg = function (v) { return Math.log10(Math.max(Math.abs(v), 1e-300)); };
      var errs = ys.map(function (y) { return lg(y - expected); });
      var refs = [];
      if (isFinite(actual)) { refs.push(lg(actual - expected)); }
      if (isFinite(allowed) && allowed > 0) { refs.push(lg(allowed)); }
      var vals = errs.concat(refs).filter(function (e) { return e > -299; });
      var lo = vals.length ? Math.min.apply(null, vals) : -16;
      var hi = vals.length ? Math.max.apply(null, vals) : 0;
      var right = panel(svg, PW, xlim, [Math.floor(lo) - 0.3, Math.ceil(hi) + 0.3],
        "|FD estimate - oracle| vs step", true);
      if (isFinite(allowed) && allowed > 0) {
        right.hline(lg(allowed), COLORS.allowed, "allowed", "5,3");
      }
      if (isFinite(actual)) { right.hline(lg(actual - expected), COLORS.ad, "|AD - oracle|"); }
      right.curve(lx, errs.map(function (e) { return e > -299 ? e : NaN; }), COLORS.fd);
    }
    return svg;
  }

  // -- wiring ----------------------------------------------------------------------------------
  function syncControls() {
    document.getElementById("f-q").value = state.q || "";
    FILTERS.forEach(function (k) { document.getElementById("f-" + k).value = state[k] || ""; });
    document.getElementById("f-size").value = String(state.size);
  }
  function update() { writeHash(); renderTable(); renderDetail(); }
  function fillSelect(k) {
    var sel = document.getElementById("f-" + k), values;
    if (k === "status") { values = ["not-ok"].concat(statuses); }
    else {
      var seen = {};
      rows.forEach(function (r) { seen[str(r, k)] = 1; });
      values = Object.keys(seen).sort();
    }
    values.forEach(function (v) {
      var o = el("option", null, v === "not-ok" ? "failed or error" : v);
      o.value = v;
      sel.appendChild(o);
    });
  }
  FILTERS.forEach(function (k) {
    fillSelect(k);
    document.getElementById("f-" + k).addEventListener("change", function (e) {
      state[k] = e.target.value; state.page = 0; update();
    });
  });
  var timer = null;
  document.getElementById("f-q").addEventListener("input", function (e) {
    clearTimeout(timer);
    timer = setTimeout(function () { state.q = e.target.value; state.page = 0; update(); }, 120);
  });
  document.getElementById("f-size").addEventListener("change", function (e) {
    state.size = parseInt(e.target.value, 10); state.page = 0; update();
  });
  document.getElementById("prev").addEventListener("click", function () { state.page--; update(); });
  document.getElementById("next").addEventListener("click", function () { state.page++; update(); });
  document.querySelectorAll("#checks-table th").forEach(function (th) {
    function sort() {
      var col = th.dataset.sort;
      state.dir = state.sort === col ? -state.dir : (col === "ratio" || col === "discrepancy" ? -1 : 1);
      state.sort = col; state.page = 0; update();
    }
    th.addEventListener("click", sort);
    th.addEventListener("keydown", function (e) { if (e.key === "Enter") { sort(); } });
  });
  function openRow(e) {
    var tr = e.target.closest("tr");
    if (!tr || !tr.dataset.id) { return; }
    state.check = tr.dataset.id; update();
  }
  var tbody = document.getElementById("rows");
  tbody.addEventListener("click", openRow);
  tbody.addEventListener("keydown", function (e) { if (e.key === "Enter") { openRow(e); } });
  window.addEventListener("hashchange", function () {
    readHash(); syncControls(); renderTable(); renderDetail();
    if (!state.check) { document.getElementById("checks").scrollIntoView(); }
  });
  readHash();
  syncControls();
  renderTable();
  renderDetail();
  document.documentElement.dataset.ready = String(Math.round(performance.now() - t0));
  performance.mark("gradcheck-ready");
})();

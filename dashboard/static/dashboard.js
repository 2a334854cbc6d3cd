// sectorflow dashboard: renders the state the server pushes on /events (server-sent events).
// Every value comes from the kvstore, written by services: it is set as text, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function number(n) { return Number(n || 0).toLocaleString("en-US"); }

function bytes(n) {
  const units = ["B", "kB", "MB", "GB", "TB"];
  let value = Number(n || 0), unit = 0;
  while (value >= 1000 && unit < units.length - 1) { value /= 1000; unit += 1; }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "no limit";
  const s = Math.round(seconds), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return `${h}:${String(m).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
}

// A span of seconds as a person reads it: 42 s, 3 min 05 s, 2 h 07 min (as acquire --wait prints it).
function span(seconds) {
  const total = Math.round(seconds);
  if (total < 60) return `${total} s`;
  if (total < 3600) return `${Math.floor(total / 60)} min ${String(total % 60).padStart(2, "0")} s`;
  return `${Math.floor(total / 3600)} h ${String(Math.floor((total % 3600) / 60)).padStart(2, "0")} min`;
}

function timeLeft(seconds) {
  if (seconds === null || seconds === undefined) return "time left unknown";
  return seconds === 0 ? "done" : `${span(seconds)} left`;
}

function badge(node, text, kind) {
  node.textContent = text;
  node.className = `badge ${kind || text}`;
}

function fillTable(id, rows) {
  const body = $(id).querySelector("tbody");
  body.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement("tr");
    for (const cell of cells) tr.append(cell instanceof Node ? wrap(cell) : el("td", cell, typeof cell === "number" ? "num" : ""));
    return tr;
  }));
}

function wrap(node) { const td = document.createElement("td"); td.append(node); return td; }

// An alert dismissed on this page stays dismissed while it is raised; raised again later (a new
// since_s), it shows again. Kept per browser: a viewer dismisses for themselves, not for others.
const DISMISSED = "sectorflow-dismissed-alerts";
function dismissed() {
  try { return new Set(JSON.parse(localStorage.getItem(DISMISSED) || "[]")); } catch { return new Set(); }
}
function alertKey(a) { return `${a.id}@${a.since_s}`; }

// The page's one time format: the browser's local date and time, 2026-11-29 14:03:07 (24 h), everywhere.
function clock(seconds) {
  const t = new Date(seconds * 1000), two = (n) => String(n).padStart(2, "0");
  return `${t.getFullYear()}-${two(t.getMonth() + 1)}-${two(t.getDate())} ` +
    `${two(t.getHours())}:${two(t.getMinutes())}:${two(t.getSeconds())}`;
}

function renderAlerts(state) {
  const gone = dismissed();
  // Forget dismissals of alerts no longer raised, so the list stays as short as the alerts.
  const raised = new Set(state.alerts.map(alertKey));
  localStorage.setItem(DISMISSED, JSON.stringify([...gone].filter((k) => raised.has(k))));
  $("alerts").replaceChildren(...state.alerts.filter((a) => !gone.has(alertKey(a))).map((a) => {
    const row = el("div", null, `alert ${a.level}`);
    row.dataset.id = a.id;
    const dismiss = el("button", "dismiss", "dismiss");
    dismiss.title = "hide this alert until it is raised again";
    dismiss.addEventListener("click", () => {
      const keys = dismissed();
      keys.add(alertKey(a));
      localStorage.setItem(DISMISSED, JSON.stringify([...keys]));
      row.remove();
    });
    row.append(el("time", clock(a.since_s), "muted"), el("span", a.text), dismiss);
    return row;
  }));
}

// The scan's known instrument settings ({quantity: {value, units, source}}), as the file records them.
function instrumentText(instrument) {
  const known = Object.entries(instrument || {});
  if (!known.length) return "";
  return "instrument: " + known.map(([name, q]) => `${name.replaceAll("_", " ")} ${Number(q.value)} ${q.units}`).join(", ");
}

function renderScan(state) {
  const scan = state.scan;
  if (!scan) return;
  $("scan-number").textContent = scan.scan;
  outcomeBadge($("scan-outcome"), scan);
  const shape = scan.shape ? `${scan.shape[0]} x ${scan.shape[1]}` : "?";
  const target = scan.routing.length ? `streamed to ${scan.routing.length} NodeGroups` : "no NodeGroup: raw files";
  const file = scan.path ? `, file ${scan.path}` : "";
  $("scan-detail").textContent = `${shape} positions, ${scan.source || "simulator"}, ${target}; ` +
    `${fates(scan)} of ${number(scan.sectors)} sectors${file}`;
  $("scan-replay").textContent = scan.replay ? `count it with: ${scan.replay}` : "";
  $("scan-instrument").textContent = instrumentText(scan.instrument);
  const elapsed = scan.duration_s === null ? "" : `${scan.in_progress ? "running for" : "took"} ${span(scan.duration_s)}`;
  $("scan-eta").textContent = scan.in_progress
    ? `${elapsed}; ${number(Math.round(scan.rate_per_s))} sectors/s; ${timeLeft(scan.left_s)}`
    : [elapsed, scan.to_file_s === null ? "" : `file written ${span(scan.to_file_s)} after the start`].filter(Boolean).join("; ");
  $("scan-progress").replaceChildren(...scan.receivers.map((r) => {
    const fraction = r.total ? r.done / r.total : 0;
    const row = el("div", null, "progress");
    row.dataset.receiver = r.receiver;
    row.dataset.done = r.done;
    row.dataset.total = r.total;
    const bar = el("div", null, "bar"), fill = el("div");
    fill.style.width = `${(100 * fraction).toFixed(1)}%`;
    bar.append(fill);
    const pace = scan.in_progress ? `, ${number(Math.round(r.rate_per_s))}/s, ${timeLeft(r.left_s)}` : "";
    row.append(el("span", `receiver ${r.receiver}`), bar, el("span", `${number(r.done)} / ${number(r.total)}${pace}`, "muted"));
    return row;
  }));
}

function renderRates(state) {
  $("rate-gbps").textContent = (state.rates.bytes_per_s / 1e9).toFixed(2);
  $("rate-fps").textContent = number(Math.round(state.rates.frames_per_s));
  $("rate-mps").textContent = number(Math.round(state.rates.messages_per_s));
  $("refused-total").textContent = number(state.refused);
}

function renderServices(state) {
  fillTable("services", state.services.map((s) => {
    const state_ = el("span");
    badge(state_, s.state);
    const kinds = Object.entries(s.refused_kinds).map(([k, v]) => `${k} ${v}`).join(", ");
    const queue = s.extra.pool_slots_in_use !== undefined ? `${s.extra.pool_slots_in_use} frames` :
      s.extra.open_scans !== undefined ? `${s.extra.open_scans} open scans` : "";
    const rate = s.bytes_per_s ? `${(s.bytes_per_s / 1e9).toFixed(2)} GB/s` : "";
    return [s.service, s.name, state_, s.scan, number(s.messages), bytes(s.bytes), rate, queue,
            s.refused ? `${s.refused} (${kinds})` : "-", `${s.age_s.toFixed(1)} s`];
  }));
}

// The sectors' fates in the account's words (sectorflow.scan_account), as acquire --wait and status say them.
function fates(scan) {
  const words = scan.planned_on_disk ? [[scan.on_disk, "on disk"]] : [[scan.counted, "counted"], [scan.spilled, "spilled"]];
  words.push([scan.missing, "missing"]);
  if (scan.in_progress) words.push([scan.pending, "pending"]);
  return words.map(([count, word]) => `${number(count)} ${word}`).join(", ");
}

// A running scan is "in progress"; one written to disk for want of a NodeGroup is "on disk, not
// counted", never a green "complete".
function outcomeBadge(node, scan) {
  if (scan.in_progress) badge(node, "in progress", "streaming");
  else badge(node, scan.outcome, scan.outcome.replace(/[^a-z]+/g, "-").replace(/-+$/, ""));
}

function renderHistory(state) {
  fillTable("history", state.recent.map((s) => {
    const outcome = el("span");
    outcomeBadge(outcome, s);
    let thumb = "-";
    if (s.thumbnail) {
      thumb = el("img", null, "thumbnail");
      thumb.src = `/thumbnails/${s.scan}.png`;
      thumb.alt = `bright field of scan ${s.scan}`;
    }
    const perFrame = s.electrons_per_frame === undefined || s.electrons_per_frame === null ? "-" : s.electrons_per_frame.toFixed(1);
    // A scan with a counted file opens its images from the file.
    let number_ = s.scan;
    if (s.path && !s.replay) {
      number_ = el("button", s.scan, "open-scan");
      number_.type = "button";
      number_.dataset.scan = s.scan;
      number_.title = `show scan ${s.scan}'s images, from ${s.path}`;
      number_.addEventListener("click", () => openPast(s.scan));
    }
    return [number_, s.requested_s ? clock(s.requested_s) : "-",
            s.duration_s === null ? "-" : span(s.duration_s), s.to_file_s === null ? "-" : span(s.to_file_s), perFrame,
            outcome, thumb, fates(s), s.replay ? `on disk; count it with: ${s.replay}` : s.path || "-"];
  }));
}

// The aggregation tier's members ([aggregator] tier): shown only for a tier of more than one. A member
// down is marked (its row and badge red) with what it costs, in the words of 'sectorflow status'.
function renderTier(state) {
  const members = state.tier || [];
  $("tier-card").hidden = members.length <= 1;
  if (members.length <= 1) return;
  const up = members.filter((m) => m.up).length, scan = members[0].scan;
  $("tier-summary").textContent = `${up} of ${members.length} members up` + (scan === null ? "" : `; slices of scan ${scan}`);
  fillTable("tier", members.map((m) => {
    const state_ = el("span");
    badge(state_, m.state);
    const rate = m.bytes_per_s ? `${(m.bytes_per_s / 1e9).toFixed(2)} GB/s` : "";
    const slice = m.share === null ? "-" : m.share === 0 ? "none" : `1/${Math.round(1 / m.share)}`;
    return [m.member, m.host, state_, m.threads_span, number(m.messages), bytes(m.bytes), rate, slice, m.note];
  }));
  [...$("tier").querySelectorAll("tbody tr")].forEach((row, i) => {
    row.dataset.member = members[i].member;
    row.dataset.up = members[i].up;
    row.classList.toggle("down", !members[i].up);
  });
}

// The LiberTEM bridges (sectorflow libertem): shown only where one runs.
function renderLibertem(state) {
  const bridges = state.libertem || [];
  $("libertem-card").hidden = !bridges.length;
  fillTable("libertem", bridges.map((b) => {
    const client = el("span");
    badge(client, b.client_connected ? "client connected" : "no client", b.client_connected ? "live" : "unknown");
    return [b.name, b.listen, client, b.last || "no scan yet", b.positions_sent, b.positions_empty, b.frames_dropped,
            b.clients_dropped];
  }));
}

function renderSessions(state) {
  const box = $("sessions"), info = state.sessions || { configured: false, available: false, error: "unknown", sessions: [] };
  // Only where Slurm is configured: a local stack has no sessions to show.
  $("sessions-card").hidden = !info.configured;
  if (!info.configured) return;
  if (!info.available) { box.replaceChildren(el("p", `Slurm not available: ${info.error}`, "muted")); return; }
  if (!info.sessions.length) { box.replaceChildren(el("p", "no session running or pending", "muted")); return; }
  const table = el("table"), head = el("tr");
  for (const h of ["job", "state", "nodes", "used", "limit", "time left", ""]) head.append(el("th", h));
  table.append(head);
  for (const s of info.sessions) {
    const tr = el("tr");
    for (const c of [s.job_id, s.state, s.nodes, s.time_used, s.time_limit, duration(s.time_left_s)]) tr.append(el("td", c));
    const cell = el("td");
    if (state.control) {
      const button = el("button", "cancel");
      button.addEventListener("click", () => post(`/api/sessions/${encodeURIComponent(s.job_id)}/cancel`, {}));
      cell.append(button);
    }
    tr.append(cell);
    table.append(tr);
  }
  box.replaceChildren(table);
}

// What each image is, in the words and units a scientist reads, comes with the names from the
// server (images.labels): the page shows whatever images the scan carries.
let imagesVersion = -1;
let lastImages = null;
let lastState = null;
// A scan of the history the viewer opened: its images from its file, shown until "back to the latest".
let past = null;

async function openPast(scan) {
  const note = $("images-past");
  let response;
  try {
    response = await fetch(`/api/scans/${scan}/images`);
  } catch (error) {
    response = null;
  }
  if (!response || !response.ok) {
    note.textContent = `scan ${scan}'s images: ${response ? await response.text() : "the dashboard did not answer"}`;
    note.hidden = false;
    return;
  }
  note.hidden = true;
  const images = await response.json();
  const record = ((lastState && lastState.recent) || []).find((s) => s.scan === scan);
  past = Object.assign(images, {past: true, scan_step: (record && record.instrument && record.instrument.scan_step) || null});
  imagesVersion = -1;
  if (lastState) renderImages(lastState);
}

function closePast() {
  past = null;
  imagesVersion = -1;
  $("images-past").hidden = true;
  if (lastState) renderImages(lastState);
}

// Every output of the scan's analyses, in the registry's order (analysis/SPEC.md).
function imageNames(images) {
  return images.names;
}

function renderImages(state) {
  $("images-latest").hidden = !past;
  if (past) {
    $("images-none").hidden = true;
    document.querySelector("#images-card .images").hidden = false;
    const perFrame = past.electrons_per_frame === null ? "" : `, ${past.electrons_per_frame.toFixed(1)} electrons per frame`;
    $("images-scan").textContent = `scan ${past.scan}, ${number(past.positions_counted)} positions` +
      (past.complete ? "" : " (incomplete)") + perFrame + `, from its file (history): ${past.path}`;
    if (imagesVersion === `past-${past.scan}`) return;
    imagesVersion = `past-${past.scan}`;
    lastImages = past;
    for (const panel of document.querySelectorAll(".panel")) drawPanel(panel, past);
    return;
  }
  let images = state.images;
  // Never the previous scan's images under a newer scan: a scan written to disk (no NodeGroup) has none
  // until it is replayed, a streamed one has them once its first frames are counted.
  const newer = state.scan && images && state.scan.scan !== images.scan && state.scan.requested_s;
  const none = !images ? "no counted file yet" : !newer ? "" : state.scan.routing.length
    ? `scan ${state.scan.scan}: no images yet (the last ones shown were scan ${images.scan}'s)`
    : `scan ${state.scan.scan} went to disk, not counted (no NodeGroup registered): no images until it is replayed`;
  $("images-none").textContent = none;
  $("images-none").hidden = !none;
  document.querySelector("#images-card .images").hidden = Boolean(none);
  if (none) { $("images-scan").textContent = ""; return; }
  const perFrame = images.electrons_per_frame === null ? "" : `, ${images.electrons_per_frame.toFixed(1)} electrons per frame`;
  $("images-scan").textContent = `scan ${images.scan}, ${number(images.positions_counted)} positions` +
    (images.live ? (images.complete ? " (counted, file to come)" : " (counting, live)")
                 : (images.complete ? "" : " (incomplete)")) + perFrame;
  if (images.version === imagesVersion) return;
  imagesVersion = images.version;
  // The scan's step, when known, gives the scan axes a physical scale (/metadata/instrument).
  const record = [state.scan, ...(state.recent || [])].find((s) => s && s.scan === images.scan);
  const step = record && record.instrument && record.instrument.scan_step;
  lastImages = Object.assign({}, images, {scan_step: step || null});
  images = lastImages;
  for (const panel of document.querySelectorAll(".panel")) drawPanel(panel, images);
}

function drawPanel(panel, images) {
  const names = imageNames(images), select = panel.querySelector("select");
  if ([...select.options].map((o) => o.value).join() !== names.join()) {
    const chosen = select.value || panel.dataset.default;
    select.replaceChildren(...names.map((n) => {
      const o = el("option", (images.labels[n] || [n])[0]);
      o.value = n;
      return o;
    }));
    select.value = names.includes(chosen) ? chosen : names[0];
  }
  const name = select.value, [title, unit] = images.labels[name] || [name, ""];
  const img = panel.querySelector("img");
  img.src = images.past ? `/images/${name}.png?scan=${images.scan}` : `/images/${name}.png?v=${images.version}`;
  img.alt = title;
  img.dataset.scan = images.scan;
  img.dataset.name = name;
  const omitted = name === images.pattern && images.detectors && images.detectors.detectors
    ? Object.entries(images.detectors.detectors).filter(([, d]) => d.outline_omitted).map(([n]) => n) : [];
  panel.querySelector("figcaption").textContent = `${title} (${unit})` +
    (omitted.length ? `; not outlined (too many edges): ${omitted.join(", ")}` : "");
  const diverging = (images.diverging || []).includes(name);
  drawColourbar(panel, diverging ? images.diverging_ramp : images.ramp, images.ranges[name]);
  panel.querySelector(".colourbar").dataset.diverging = diverging;
  drawDetectors(panel.querySelector("svg"), name === images.pattern ? images : null);
  drawAxes(panel, name === images.pattern ? images.frame_shape : images.scan_shape, name === images.pattern,
           name === images.pattern ? null : images.scan_step);
}

// Axes under and beside the image: its rows and columns (scan positions, or detector pixels for the
// pattern) at the first, middle and last, and the physical distance when the scan step is known.
function drawAxes(panel, shape, pattern, step) {
  const [rows, cols] = shape || [0, 0];
  const what = pattern ? "detector" : "scan";
  const scale = (i) => step ? `${i} (${label(i * step.value)} ${step.units})` : String(i);
  for (const [axis, n, title] of [["x", cols, `${what} x${pattern ? " (px)" : " (positions)"}`],
                                  ["y", rows, `${what} y${pattern ? " (px)" : " (positions)"}`]]) {
    const box = panel.querySelector(`.axis-${axis}`);
    const ticks = n ? [...new Set([0, Math.floor((n - 1) / 2), n - 1])] : [];
    box.replaceChildren(...ticks.map((i) => {
      const tick = el("span", pattern || axis === "y" ? String(i) : scale(i), "tick");
      // At the middle of position i: the image spans n positions edge to edge.
      tick.style[axis === "x" ? "left" : "top"] = `${(100 * (i + 0.5)) / n}%`;
      return tick;
    }), el("span", title + (step && !pattern && axis === "x" ? `, ${label(step.value)} ${step.units} a step` : ""),
           "axis-title"));
    box.dataset.ticks = ticks.join(",");
  }
}

function label(value) {
  const magnitude = Math.abs(value);
  if (magnitude !== 0 && (magnitude >= 1e5 || magnitude < 1e-2)) return value.toExponential(2);
  return Number.isInteger(value) ? String(value) : value.toFixed(2);
}

// The bar spans the image's smallest to largest value on the ramp the server draws with (png.py),
// linearly, or for the pattern in log(1 + value) (its caption says so).
function drawColourbar(panel, ramp, range) {
  const canvas = panel.querySelector("canvas"), context = canvas.getContext("2d");
  const gradient = context.createLinearGradient(0, canvas.height, 0, 0);
  ramp.forEach(([r, g, b], i) => gradient.addColorStop(i / (ramp.length - 1), `rgb(${r},${g},${b})`));
  context.fillStyle = gradient;
  context.fillRect(0, 0, canvas.width, canvas.height);
  const bar = panel.querySelector(".colourbar");
  bar.dataset.min = range ? range[0] : "";
  bar.dataset.max = range ? range[1] : "";
  panel.querySelector(".bar-max").textContent = range ? label(range[1]) : "";
  panel.querySelector(".bar-min").textContent = range ? label(range[0]) : "nothing counted";
  // Ticks between, evenly spaced in value (the bar is linear in what it shows): 0 is the middle one of
  // a signed image's.
  const inner = [...panel.querySelectorAll(".bar-tick")];
  inner.forEach((tick, i) => {
    const fraction = 1 - (i + 1) / (inner.length + 1);
    tick.textContent = range ? label(range[0] + fraction * (range[1] - range[0])) : "";
  });
}

const SVG = "http://www.w3.org/2000/svg";

function shape(tag, attributes) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  node.setAttribute("vector-effect", "non-scaling-stroke");
  return node;
}

// The virtual detectors on the summed pattern, in detector pixels (pixel (r, c) spans [r, r+1) x [c, c+1)):
// a disk's circle, an annulus's two, a rectangle's outline, a mask's outline (its pixels' edges, sent
// as an SVG path by the server, dashboard/outline.py); each titled with the detector's name.
function drawDetectors(svg, images) {
  svg.replaceChildren();
  const detectors = images && images.detectors && images.detectors.detectors;
  if (!detectors || !images.frame_shape) return;
  const [rows, cols] = images.frame_shape;
  svg.setAttribute("viewBox", `0 0 ${cols} ${rows}`);
  svg.setAttribute("preserveAspectRatio", "none");
  for (const [name, d] of Object.entries(detectors)) {
    if (d.kind === "mask" && !d.outline) continue;  // too many edges to draw (d.outline_omitted says so)
    const drawn = d.kind === "mask" ? [shape("path", {d: d.outline, class: "mask"})] : d.kind === "rectangle"
      ? [shape("rect", {x: d.col0, y: d.row0, width: d.cols, height: d.rows, class: "rectangle"})]
      : (d.kind === "disk" ? [d.radius] : [d.inner, d.outer]).map((r) =>
          // Pixel (r, c) is drawn as the square [c, c+1) x [r, r+1): its point (r, c) at its middle.
          shape("circle", {cx: d.centre_col + 0.5, cy: d.centre_row + 0.5, r, class: d.kind === "disk" ? "bright" : "dark"}));
    for (const node of drawn) {
      node.append(Object.assign(document.createElementNS(SVG, "title"), {textContent: name}));
      svg.append(node);
    }
  }
}

function render(state) {
  lastState = state;
  const live = state.kvstore.reachable;
  badge($("connection"), live ? "live" : "kvstore unreachable", live ? "live" : "unreachable");
  const stack = state.kvstore.stack ? `, stack ${state.kvstore.stack}` : "";
  $("kvstore-address").textContent = `kvstore ${state.kvstore.address}${stack}, sequence ${state.kvstore.sequence}`;
  $("updated").textContent = `updated ${clock(state.now_s)}`;
  // A kvstore pair's active server and an aggregator standby's lease: shown only where configured.
  $("failover").hidden = state.failover.length === 0;
  $("failover").textContent = state.failover.join("; ");
  $("control").hidden = !state.control;
  renderAlerts(state);
  renderScan(state);
  renderRates(state);
  renderServices(state);
  renderHistory(state);
  renderSessions(state);
  renderTier(state);
  renderLibertem(state);
  renderImages(state);
}

async function post(path, body) {
  const result = $("control-result");
  try {
    const response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${$("token").value}` },
      body: JSON.stringify(body),
    });
    const answer = await response.json();
    result.textContent = answer.ok ? answer.message : `refused: ${answer.error}`;
  } catch (error) {
    result.textContent = `failed: ${error}`;
  }
}

function formBody(form) {
  const body = {};
  for (const [key, value] of new FormData(form).entries()) if (value !== "") body[key] = value;
  return body;
}

function connect() {
  const source = new EventSource("/events");
  source.onmessage = (event) => render(JSON.parse(event.data));
  // The browser reconnects by itself (the stream's retry field); meanwhile say so.
  source.onerror = () => badge($("connection"), "dashboard unreachable", "unreachable");
}

document.addEventListener("DOMContentLoaded", () => {
  $("scan-form").addEventListener("submit", (e) => { e.preventDefault(); post("/api/scans", formBody(e.target)); });
  $("images-latest").addEventListener("click", closePast);
  $("session-form").addEventListener("submit", (e) => { e.preventDefault(); post("/api/sessions", formBody(e.target)); });
  for (const panel of document.querySelectorAll(".panel")) {
    panel.querySelector("select").addEventListener("change", () => { if (lastImages) drawPanel(panel, lastImages); });
  }
  connect();
});

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

function renderAlerts(state) {
  $("alerts").replaceChildren(...state.alerts.map((a) => el("div", a.text, `alert ${a.level}`)));
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
  $("scan-progress").replaceChildren(...scan.receivers.map((r) => {
    const fraction = r.total ? r.done / r.total : 0;
    const row = el("div", null, "progress");
    row.dataset.receiver = r.receiver;
    row.dataset.done = r.done;
    row.dataset.total = r.total;
    const bar = el("div", null, "bar"), fill = el("div");
    fill.style.width = `${(100 * fraction).toFixed(1)}%`;
    bar.append(fill);
    row.append(el("span", `receiver ${r.receiver}`), bar, el("span", `${number(r.done)} / ${number(r.total)}`, "muted"));
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

function renderRecent(state) {
  fillTable("recent", state.recent.map((s) => {
    const outcome = el("span");
    outcomeBadge(outcome, s);
    return [s.scan, s.shape ? `${s.shape[0]} x ${s.shape[1]}` : "?", outcome, number(s.counted), number(s.spilled),
            number(s.on_disk), number(s.pending), number(s.missing), s.replay ? `on disk; count it with: ${s.replay}` : s.path || "-"];
  }));
}

function renderSessions(state) {
  const box = $("sessions"), info = state.sessions || { available: false, error: "unknown", sessions: [] };
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

let imagesVersion = -1;
function renderImages(state) {
  const images = state.images;
  $("images-none").hidden = Boolean(images);
  if (!images) return;
  $("images-scan").textContent = `scan ${images.scan}, ${number(images.positions_counted)} positions` +
    (images.live ? (images.complete ? " (counted, file to come)" : " (counting, live)")
                 : (images.complete ? "" : " (incomplete)"));
  if (images.version === imagesVersion) return;
  imagesVersion = images.version;
  for (const name of [...images.names, "diffraction"]) {
    const img = $(`image-${name}`);
    if (img) { img.src = `/images/${name}.png?v=${images.version}`; img.dataset.scan = images.scan; }
  }
}

function render(state) {
  const live = state.kvstore.reachable;
  badge($("connection"), live ? "live" : "kvstore unreachable", live ? "live" : "unreachable");
  $("kvstore-address").textContent = `kvstore ${state.kvstore.address}, sequence ${state.kvstore.sequence}`;
  $("updated").textContent = `updated ${new Date(state.now_s * 1000).toLocaleTimeString()}`;
  $("control").hidden = !state.control;
  renderAlerts(state);
  renderScan(state);
  renderRates(state);
  renderServices(state);
  renderRecent(state);
  renderSessions(state);
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
  $("session-form").addEventListener("submit", (e) => { e.preventDefault(); post("/api/sessions", formBody(e.target)); });
  connect();
});

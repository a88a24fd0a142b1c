// filtex-broker console: polls the JSON API (docs/CONSOLE.md) and renders it. No libraries.
// Every value from the broker goes into the page as text (textContent), never as HTML.
"use strict";

const POLL_MS = 1000;
let previous = null;  // the last overview, for rates
let history = null;   // GET /api/history: the charts, and rates before two polls
const { CHARTS, latestRate, formatValue } = window.filtexCharts;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  }
  return node;
}

function num(value, attrs) {
  return el("td", Object.assign({ class: "num" }, attrs || {}), value ?? "");
}

// Per second between two polls; before the second poll, the history's latest point.
function rate(now, before, seconds, fallback) {
  if (before === undefined || before === null || !(seconds > 0)) {
    return fallback === null || fallback === undefined ? "" : fallback.toFixed(1);
  }
  return ((now - before) / seconds).toFixed(1);
}

function chartCell(chart) {
  return el("td", { class: "chart-cell" }, chart || el("span", { class: "muted" }, "–"));
}

function formatJson(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

async function api(path, options) {
  const response = await fetch(path, Object.assign({ credentials: "same-origin" }, options || {}));
  const body = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

// A stream's offsets and segments, in one cell: "0–9, next 10; 1 segment, 0 dropped".
function streamCell(stream) {
  if (!stream) return el("td", { "data-field": "stream" });
  const held = stream.first_offset === null ? "empty"
    : `${stream.first_offset}–${stream.last_offset}`;
  const segments = `${stream.segments} segment${stream.segments === 1 ? "" : "s"}`;
  return el("td", { "data-field": "stream", class: "stream",
                    title: "offsets held, the next offset, segments held and dropped by retention" },
    `${held}, next ${stream.next_offset}; ${segments}, ${stream.segments_dropped} dropped`);
}

function renderNodes(state, seconds) {
  const before = new Map((previous ? previous.nodes : []).map((n) => [n.name, n]));
  const tbody = document.querySelector("#nodes tbody");
  tbody.replaceChildren(...state.nodes.map((node) => {
    const old = before.get(node.name) || {};
    return el("tr", { "data-node": node.name },
      el("td", {}, node.name), el("td", {}, node.kind),
      num(node.depth, { "data-field": "depth" }), num(node.bytes, { "data-field": "bytes" }),
      num(node.in, { "data-field": "in" }),
      num(rate(node.in, old.in, seconds, latestRate(history, "nodes", node.name, "in"))),
      num(node.out, { "data-field": "out" }),
      num(rate(node.out, old.out, seconds, latestRate(history, "nodes", node.name, "out"))),
      num(node.filtered_out, { "data-field": "filtered_out" }),
      num(node.expired, { "data-field": "expired" }),
      num(node.scheduled, { "data-field": "scheduled" }),
      num(node.consumers, { "data-field": "consumers" }),
      num(node.producers, { "data-field": "producers" }), streamCell(node.stream),
      chartCell(history && CHARTS.nodeRates(history, node.name)),
      chartCell(history && CHARTS.nodeDepth(history, node.name)));
  }));
  document.getElementById("no-nodes").hidden = state.nodes.length > 0;
}

const COUNTERS = ["evaluated", "matched", "not_matched", "unknown", "errors", "over_budget",
                  "ruled_out"];

function renderLinks(state, seconds) {
  const before = new Map();
  for (const node of previous ? previous.nodes : []) {
    for (const link of node.links) before.set(link.id, link);
  }
  const container = document.getElementById("links");
  const relay = Boolean(state.upstream);
  const blocks = [];
  for (const node of state.nodes) {
    if (!node.links.length) continue;
    const stream = Boolean(node.stream);
    const head = el("tr", {}, el("th", {}, "link"), el("th", {}, "peer"), el("th", {}, "role"),
      ...(stream ? [el("th", { title: "the next offset it reads" }, "position"),
                    el("th", { title: "offsets from its position to the stream's end" }, "lag")]
                 : []),
      el("th", {}, "credit"), el("th", {}, "sent"), el("th", {}, "sent/s"),
      el("th", {}, "unsettled"), el("th", {}, "filters"),
      el("th", { title: "matched and not matched per second, last 15 minutes" },
         "matched / not matched"),
      ...COUNTERS.map((c) => el("th", {}, c.replace("_", " "))), el("th", {}, "evaluated/s"),
      ...(relay ? [el("th", {}, "from upstream"), el("th", {}, "pushed down")] : []));
    const rows = node.links.map((link) => {
      const old = before.get(link.id) || {};
      const counters = link.counters || {};
      const oldCounters = old.counters || {};
      const filters = link.filtered
        ? el("div", {}, ...link.filters.map((f) => el("div", { class: "filter" },
            el("code", {}, f.key), " ", el("span", { class: "muted" }, f.type), el("br"),
            el("code", { "data-normalised": f.key }, formatJson(f.normalised)))))
        : el("span", { class: "muted" }, "unfiltered");
      return el("tr", { "data-link": link.id, "data-link-name": link.name },
        el("td", {}, link.name + (link.attached ? "" : " (detached)")),
        el("td", { class: "peer", title: link.peer },
           (link.connection === null ? "" : `#${link.connection} `) + link.peer.split("@").pop()),
        el("td", {}, link.role + (link.durable ? ", durable" : "")),
        ...(stream ? [num(link.position, { "data-counter": "position" }),
                      num(link.lag, { "data-counter": "lag" })] : []),
        num(link.credit), num(link.sent, { "data-counter": "sent" }),
        num(rate(link.sent, old.sent, seconds)), num(link.unsettled),
        el("td", { class: "filters" }, filters),
        chartCell(history && link.counters && CHARTS.link(history, link.id)),
        ...COUNTERS.map((c) => num(counters[c], { "data-counter": c })),
        num(rate(counters.evaluated, oldCounters.evaluated, seconds)),
        ...(relay ? [num(link.received, { "data-counter": "received" }),
                     el("td", {}, link.pushed_down ? el("code", {}, link.pushed_down)
                                                    : el("span", { class: "muted" }, "nothing"))]
                  : []));
    });
    blocks.push(el("h3", {}, `${node.kind} ${node.name}`),
                el("table", { "data-links-of": node.name }, el("thead", {}, head),
                   el("tbody", {}, ...rows)));
  }
  container.replaceChildren(...(blocks.length ? blocks
                                : [el("p", { class: "muted" }, "No consumer links.")]));
}

function renderMemory(state) {
  const memory = state.broker.memory;
  const share = memory.limit ? ` (${(100 * memory.used / memory.limit).toFixed(1)}%)` : "";
  document.getElementById("memory-text").textContent =
    `${formatValue(memory.used, "B")} of ${memory.limit ? formatValue(memory.limit, "B") : "no limit"}${share}`;
  document.getElementById("memory-chart").replaceChildren(
    ...(history ? [CHARTS.memory(history)] : []));
}

// The history changes once per sample: fetched at load (the charts are drawn on first
// paint) and then every interval.
async function pollHistory() {
  let wait = 5000;
  try {
    history = await api("/api/history");
    wait = Math.max(1000, history.interval * 1000);
  } catch (error) {
    // the overview's status line says what is wrong; the charts keep their last state
  }
  setTimeout(pollHistory, wait);
  return history;
}

function renderRefusals(state) {
  const counts = Object.entries(state.refusals.counts).map(([r, n]) => `${r}: ${n}`);
  document.getElementById("refusal-counts").textContent =
    counts.length ? "since start: " + counts.join(", ") : "No refusals since start.";
  document.querySelector("#refusals tbody").replaceChildren(...state.refusals.recent.map((r) =>
    el("tr", { "data-refusal": r.link },
      el("td", {}, new Date(r.time * 1000).toLocaleTimeString()), el("td", {}, r.link),
      el("td", {}, r.address ?? ""), el("td", {}, r.reason), el("td", {}, el("pre", {}, r.detail)))));
}

function renderUpstream(state) {
  const section = document.getElementById("upstream-section");
  const up = state.upstream;
  section.hidden = !up;
  if (!up) return;
  document.getElementById("upstream").replaceChildren(
    el("div", {}, `${up.url}: `, el("strong", { id: "upstream-connected" },
      up.connected ? "connected" : "not connected"),
      up.product ? ` (${up.product})` : "",
      `; selector pushdown ${up.pushdown ? "on" : "off"} (${up.mode})`));
}

function renderNodeChoice(state) {
  const select = document.getElementById("test-node");
  const chosen = select.value;
  const names = state.nodes.filter((n) => !n.kind.startsWith("upstream")).map((n) => n.name);
  const current = Array.from(select.options).slice(1).map((o) => o.value);
  if (names.join("\n") === current.join("\n")) return;
  select.replaceChildren(el("option", { value: "" }, "(none)"),
                         ...names.map((name) => el("option", { value: name }, name)));
  select.value = names.includes(chosen) ? chosen : "";
}

async function poll() {
  const status = document.getElementById("status");
  try {
    const state = await api("/api/overview");
    const seconds = previous ? state.time - previous.time : 0;
    document.getElementById("broker").textContent =
      `${state.broker.container_id} ${state.broker.version}, ${state.broker.connections} connection(s)` +
      (state.broker.connections_closed_idle
        ? `, ${state.broker.connections_closed_idle} closed for idle-timeout` : "");
    renderMemory(state);
    renderUpstream(state);
    renderNodes(state, seconds);
    renderLinks(state, seconds);
    renderRefusals(state);
    renderNodeChoice(state);
    previous = state;
    status.textContent = "updated " + new Date(state.time * 1000).toLocaleTimeString();
    status.className = "status";
  } catch (error) {
    status.textContent = "not updated: " + error.message;
    status.className = "status error";
  }
  setTimeout(poll, POLL_MS);
}

function renderTest(answer) {
  const out = [];
  const check = answer.check;
  if (!check.valid) {
    const where = check.error.line ? ` (line ${check.error.line}, column ${check.error.column})` : "";
    out.push(el("p", { id: "test-validity", class: "error" }, "invalid" + where),
             el("pre", { id: "test-error" }, check.error.message));
  } else {
    out.push(el("p", { id: "test-validity" }, "valid"));
    if (check.notes && check.notes.length) {
      out.push(el("div", { id: "test-notes" },
        ...check.notes.map((n) => el("p", { class: "error" }, n))));
    }
    out.push(el("h3", {}, "Normalised"), el("table", {}, el("tbody", {},
      ...check.filters.map((f) => el("tr", {}, el("td", {}, el("code", {}, f.key)),
        el("td", {}, f.type), el("td", {}, el("code", { class: "normalised" }, formatJson(f.normalised))))))));
    const p = answer.pushdown;
    out.push(el("h3", {}, "Upstream pushdown (relay mode)"),
      el("p", { id: "test-pushdown" }, p.selector ? el("code", {}, p.selector) : "nothing pushed",
         p.selector ? (p.exact ? " (exact)" : " (implied; the relay still evaluates the rest)") : ""),
      ...p.kept_local.map((r) => el("div", { class: "muted" }, "kept local: " + r)));
    out.push(el("h3", {}, "Spark (filtex-spark explain)"), el("pre", { id: "test-spark" }, answer.spark));
    if (answer.messages) {
      out.push(el("h3", {}, `Last ${answer.messages.length} message(s) of ${answer.node}`));
      out.push(el("table", { id: "test-messages" }, el("thead", {}, el("tr", {},
          el("th", {}, "position"), el("th", {}, "state"), el("th", {}, "result"),
          el("th", {}, "why"), el("th", {}, "message"))),
        el("tbody", {}, ...answer.messages.map((m) => el("tr", { "data-position": m.position },
          num(m.position), el("td", {}, m.state),
          el("td", { class: m.result, "data-result": m.result }, m.result),
          el("td", {}, m.reason ?? ""),
          el("td", {}, el("code", {}, JSON.stringify(m.message))))))));
    }
  }
  document.getElementById("test-result").replaceChildren(...out);
}

async function runTest(event) {
  event.preventDefault();
  const limit = Number(document.getElementById("test-limit").value || 0);
  const request = {
    text: document.getElementById("test-text").value,
    kind: document.getElementById("test-kind").value,
    node: document.getElementById("test-node").value || null,
    limit: limit, body: document.getElementById("test-body").checked,
  };
  try {
    renderTest(await api("/api/test", { method: "POST", body: JSON.stringify(request),
                                        headers: { "Content-Type": "application/json" } }));
  } catch (error) {
    document.getElementById("test-result").replaceChildren(
      el("p", { id: "test-validity", class: "error" }, "error: " + error.message));
  }
}

document.getElementById("tester").addEventListener("submit", runTest);
pollHistory().finally(poll);

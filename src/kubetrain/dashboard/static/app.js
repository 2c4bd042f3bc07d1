// kubetrain dashboard front end: plain DOM, no build step. Every value shown (state, progress,
// ETA, key metric, age, steps) arrives computed by the server with the CLI's own functions; this
// file only lays them out. Text always goes in through textContent, never as HTML.
"use strict";

const main = document.getElementById("main");
const banner = document.getElementById("banner");
let session = null;
let cleanup = [];
let focusTab = false; // after arrow keys in the tab list, the new tab takes the focus

// Sections in the top bar: an entry here and a route below.
const SECTIONS = [
  { id: "jobs", href: "#/", label: "TrainJobs" },
  { id: "experiments", href: "#/experiments", label: "Experiments" },
  { id: "runtimes", href: "#/runtimes", label: "Runtimes" },
];
const STATES = ["Created", "Running", "Suspended", "Complete", "Failed"];
const PAGE = 100;

// --- helpers ------------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

class ApiError extends Error {
  constructor(message, status) { super(message); this.status = status; }
}

async function api(path, options) {
  let res;
  try {
    res = await fetch(path, { credentials: "same-origin", ...(options || {}) });
  } catch (e) {
    throw new ApiError("The dashboard server does not answer (was `kubetrain dashboard` stopped?).", 0);
  }
  let body = null;
  try { body = await res.json(); } catch (e) { body = null; }
  if (!res.ok) {
    const msg = (body && body.error) || `HTTP ${res.status}`;
    throw new ApiError(msg, res.status);
  }
  return body;
}

function showBanner(text, kind) {
  if (!text) { banner.hidden = true; banner.textContent = ""; return; }
  banner.hidden = false;
  banner.className = "banner" + (kind ? " " + kind : "");
  banner.textContent = text;
}

function toast(text) {
  const el = h("div", { class: "toast", role: "status" }, text);
  document.body.append(el);
  setTimeout(() => el.remove(), 4000);
}

function badge(state) {
  return h("span", { class: "badge s-" + String(state).replace(/[^A-Za-z]/g, "") }, state);
}

function progressBar(percent, state) {
  if (percent === null || percent === undefined) return h("span", { class: "muted" }, "–");
  const p = Math.max(0, Math.min(100, percent));
  return h("div", { class: "bar" + (p >= 100 ? " done" : "") },
    h("div", { class: "track", role: "progressbar", "aria-label": "progress", "aria-valuemin": "0",
      "aria-valuemax": "100", "aria-valuenow": String(p) },
      h("div", { class: "fill", style: `width:${p}%` })),
    h("span", { class: "pct" }, `${p}%`));
}

function metricText(m) {
  if (!m) return h("span", { class: "muted" }, "–");
  return h("span", { class: "metric" }, h("b", {}, m.name + " "), m.value);
}

function table(columns, rows, opts) {
  const head = h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.cls || null }, c.label)));
  const body = h("tbody", {}, rows.map((r) => h("tr", {}, columns.map((c) => {
    const v = c.render ? c.render(r) : r[c.key];
    return h("td", { class: c.cls || null }, v === "" || v === null || v === undefined ? "–" : v);
  }))));
  return h("div", { class: "tablewrap" }, h("table", { "aria-label": (opts && opts.label) || null },
    h("thead", {}, head), body));
}

function card(label, value) {
  return h("div", { class: "panel" }, h("dt", {}, label), h("dd", {}, value));
}

function onCleanup(fn) { cleanup.push(fn); }

function stream(path, handlers) {
  const es = new EventSource(path);
  for (const [event, fn] of Object.entries(handlers)) {
    es.addEventListener(event, (e) => fn(e.data ? JSON.parse(e.data) : null));
  }
  // The browser retries by itself; say why the page stopped moving meanwhile.
  es.onerror = () => { explainLostStream(); };
  onCleanup(() => es.close());
  return es;
}

async function explainLostStream() {
  try {
    await api("/api/session");
  } catch (e) {
    setLive(false, e.status === 401 ? "session ended" : "dashboard server unreachable");
    showBanner(e.status === 401
      ? "Your session has ended (the dashboard was restarted, or its token changed). Open the URL printed by `kubetrain dashboard` again."
      : e.message);
  }
}

function setLive(ok, text) {
  const where = document.getElementById("where");
  where.textContent = "";
  where.append(h("span", { class: "live" + (ok ? "" : " down"), "aria-hidden": "true" }), text);
}

// --- router -------------------------------------------------------------------------------

function route() {
  for (const fn of cleanup) { try { fn(); } catch (e) { /* already closed */ } }
  cleanup = [];
  showBanner(null);
  const parts = location.hash.split("?")[0].replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  let section = "jobs";
  main.textContent = "";
  if (parts[0] === "jobs" && parts.length >= 3) {
    jobPage(parts[1], parts[2], parts[3] || "overview");
  } else if (parts[0] === "experiments" && parts.length >= 3) {
    section = "experiments";
    experimentPage(parts[1], parts[2]);
  } else if (parts[0] === "experiments") {
    section = "experiments";
    experimentsPage();
  } else if (parts[0] === "runtimes") {
    section = "runtimes";
    runtimesPage();
  } else if (parts[0] === "" || parts[0] === "jobs") {
    jobsPage();
  } else {
    main.append(h("div", { class: "panel empty" }, "No such page. ", h("a", { href: "#/" }, "See all TrainJobs.")));
  }
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.dataset.nav === section) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

// --- TrainJobs list -----------------------------------------------------------------------

function jobsPage() {
  document.title = "TrainJobs · kubetrain";
  const rows = new Map();
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  let shown = PAGE;
  let loaded = false;

  const nsSelect = h("select", { id: "f-ns" }, h("option", { value: "" }, "All namespaces"));
  const stateSelect = h("select", { id: "f-state" }, h("option", { value: "" }, "All states"),
    STATES.map((s) => h("option", { value: s }, s)));
  const labelInput = h("input", { id: "f-label", type: "text", placeholder: "team=nlp,env", autocomplete: "off" });
  const nameInput = h("input", { id: "f-name", type: "search", placeholder: "name contains…", autocomplete: "off" });
  const count = h("span", { class: "count", "aria-live": "polite" });
  const body = h("div", { class: "panel flush" }, h("div", { class: "empty" }, "Loading TrainJobs…"));
  stateSelect.value = params.get("state") || "";
  labelInput.value = params.get("label") || "";

  main.append(
    h("h1", {}, "TrainJobs"),
    h("div", { class: "filters", role: "search", "aria-label": "Filter TrainJobs" },
      h("label", { for: "f-name" }, "Name", nameInput),
      h("label", { for: "f-ns" }, "Namespace", nsSelect),
      h("label", { for: "f-state" }, "State", stateSelect),
      h("label", { for: "f-label" }, "Labels (key=value, comma-separated)", labelInput),
      count),
    body);

  function labelMatch(labels, text) {
    for (const term of text.split(",").map((t) => t.trim()).filter(Boolean)) {
      const [k, ...rest] = term.split("=");
      if (!(k.trim() in labels)) return false;
      if (rest.length && labels[k.trim()] !== rest.join("=").trim()) return false;
    }
    return true;
  }

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  }

  function refreshNamespaces() {
    const seen = new Set([...rows.values()].map((r) => r.cells.NAMESPACE));
    const have = new Set([...nsSelect.options].map((o) => o.value));
    for (const ns of [...seen].sort()) {
      if (!have.has(ns)) nsSelect.append(h("option", { value: ns }, ns));
    }
    if (params.get("ns") && seen.has(params.get("ns")) && !nsSelect.dataset.init) {
      nsSelect.value = params.get("ns");
      nsSelect.dataset.init = "1";
    }
  }

  function render() {
    if (!loaded) return;
    const ns = nsSelect.value, state = stateSelect.value;
    const label = labelInput.value.trim(), name = nameInput.value.trim().toLowerCase();
    const all = [...rows.values()];
    const hits = all.filter((r) => (!ns || r.cells.NAMESPACE === ns) && (!state || r.cells.STATE === state)
      && (!name || r.cells.NAME.toLowerCase().includes(name)) && (!label || labelMatch(r.labels, label)));
    hits.sort((a, b) => (b.created || "").localeCompare(a.created || "") || a.key.localeCompare(b.key));
    count.textContent = hits.length === all.length ? `${all.length} TrainJobs` : `${hits.length} of ${all.length} TrainJobs`;
    body.textContent = "";
    if (!hits.length) {
      body.append(h("div", { class: "empty" }, all.length
        ? "No TrainJob matches these filters."
        : h("span", {}, "No TrainJobs yet. Create one with ", h("code", {}, "kubetrain apply -f trainjob.yaml"), ".")));
      return;
    }
    const columns = [
      { label: "Name", cls: "name", render: (r) => h("a", { href: `#/jobs/${encodeURIComponent(r.cells.NAMESPACE)}/${encodeURIComponent(r.cells.NAME)}` }, r.cells.NAME) },
      { label: "Namespace", cls: "hide-sm", render: (r) => r.cells.NAMESPACE },
      { label: "State", render: (r) => badge(r.cells.STATE) },
      { label: "Runtime", cls: "hide-sm", render: (r) => r.cells.RUNTIME },
      { label: "Nodes", cls: "num hide-sm", render: (r) => r.cells.NODES },
      { label: "Progress", render: (r) => progressBar(r.percent, r.cells.STATE) },
      { label: "ETA", cls: "num hide-sm", render: (r) => r.cells.ETA },
      { label: "Key metric", cls: "hide-sm", render: (r) => metricText(r.metric) },
      { label: "Age", cls: "num", render: (r) => h("span", { "data-age": r.key }, r.cells.AGE) },
    ];
    const t = table(columns, hits.slice(0, shown), { label: "TrainJobs" });
    t.querySelectorAll("tbody tr").forEach((tr, i) => { tr.dataset.key = hits[i].key; });
    body.append(t);
    if (hits.length > shown) {
      body.append(h("div", { class: "more" }, h("button", { class: "secondary", onclick: () => { shown += PAGE * 5; render(); } },
        `Show more (${hits.length - shown} hidden)`)));
    }
  }

  for (const el of [nsSelect, stateSelect]) el.addEventListener("change", () => { shown = PAGE; render(); });
  for (const el of [labelInput, nameInput]) el.addEventListener("input", () => { shown = PAGE; schedule(); });

  stream("/api/trainjobs/stream", {
    loading: () => setLive(true, "connecting…"),
    snapshot: (m) => {
      rows.clear();
      for (const r of m.rows) rows.set(r.key, r);
      loaded = true;
      showBanner(null);
      setLive(true, `live · ${session ? session.context : ""}`);
      refreshNamespaces();
      render();
      performance.mark("kt:list-ready");
    },
    row: (m) => { rows.set(m.row.key, m.row); refreshNamespaces(); schedule(); },
    gone: (m) => { rows.delete(m.key); schedule(); },
    ages: (m) => {
      for (const [k, v] of Object.entries(m.ages)) { const r = rows.get(k); if (r) r.cells.AGE = v; }
      for (const el of body.querySelectorAll("[data-age]")) { const v = m.ages[el.dataset.age]; if (v) el.textContent = v; }
    },
    "api-error": (m) => {
      showBanner(`Cannot read from the Kubernetes API: ${m.message}. Retrying…`);
      setLive(false, "API unreachable");
      if (!loaded) { body.textContent = ""; body.append(h("div", { class: "empty" }, "Waiting for the Kubernetes API…")); }
    },
  });
}

// --- one TrainJob -------------------------------------------------------------------------

const TABS = [["overview", "Overview"], ["logs", "Logs"], ["events", "Events"], ["yaml", "YAML"]];

function jobPage(ns, name, tab) {
  document.title = `${name} · TrainJob · kubetrain`;
  const base = `/api/trainjobs/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`;
  const href = (t) => `#/jobs/${encodeURIComponent(ns)}/${encodeURIComponent(name)}/${t}`;
  const header = h("div", {});
  const panel = h("div", { id: "tabpanel", role: "tabpanel" });
  const tabs = h("div", { class: "tabs", role: "tablist", "aria-label": "TrainJob sections" },
    TABS.map(([id, label]) => h("button", { role: "tab", id: "tab-" + id, "aria-selected": String(id === tab),
      "aria-controls": "tabpanel", tabindex: id === tab ? "0" : "-1", onclick: () => { location.hash = href(id); } }, label)));
  tabs.addEventListener("keydown", (e) => {
    const i = TABS.findIndex(([id]) => id === tab);
    const d = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
    if (d) { focusTab = true; location.hash = href(TABS[(i + d + TABS.length) % TABS.length][0]); }
  });
  panel.setAttribute("aria-labelledby", "tab-" + tab);
  main.append(h("p", { class: "muted" }, h("a", { href: "#/" }, "TrainJobs"), ` / ${ns} /`), header, tabs, panel);
  if (focusTab) { focusTab = false; document.getElementById("tab-" + tab).focus(); }

  let detail = null;
  let refreshing = false, again = false;
  const charts = tab === "overview" ? makeCharts(base) : null;
  if (charts) onCleanup(() => charts.destroy());

  async function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    try {
      detail = await api(tab === "events" ? base + "?events=1" : base);
      showBanner(null);
      drawHeader();
      drawTab();
      if (charts) await charts.update();
    } catch (e) {
      if (e.status === 404) {
        header.textContent = "";
        panel.textContent = "";
        tabs.hidden = true;
        header.append(h("h1", {}, name), h("div", { class: "panel empty", role: "alert" },
          `There is no TrainJob "${name}" in namespace "${ns}" (it may have been deleted). `, h("a", { href: "#/" }, "See all TrainJobs.")));
      } else {
        showBanner(e.message);
      }
    } finally {
      refreshing = false;
      if (again) { again = false; setTimeout(refresh, 300); }
    }
  }

  function drawHeader() {
    const r = detail.row;
    const actions = h("div", { class: "actions" });
    if (detail.allowActions) {
      const suspended = detail.suspended;
      const terminal = r.cells.STATE === "Complete" || r.cells.STATE === "Failed";
      actions.append(
        h("button", { class: "secondary", disabled: terminal || null, onclick: () => act(suspended ? "resume" : "suspend") }, suspended ? "Resume" : "Suspend"),
        h("button", { class: "danger", onclick: () => act("delete") }, "Delete"));
    }
    header.textContent = "";
    header.append(
      h("h1", {}, name, badge(r.cells.STATE), actions),
      h("p", { class: "muted", id: "job-message", hidden: !detail.message }, detail.message),
      h("dl", { class: "summary" },
        card("Progress", progressBar(r.percent, r.cells.STATE)),
        card("ETA", r.cells.ETA),
        card("Key metric", metricText(r.metric)),
        card("Runtime", r.cells.RUNTIME),
        card("Nodes", r.cells.NODES),
        card("Steps", r.cells.STEPS),
        card("Age", r.cells.AGE)));
  }

  async function act(verb) {
    const dialog = document.getElementById("confirm");
    const what = { suspend: "Suspend", resume: "Resume", delete: "Delete" }[verb];
    document.getElementById("confirm-title").textContent = `${what} TrainJob ${name}?`;
    document.getElementById("confirm-text").textContent = {
      suspend: "Its pods stop now; Resume starts them again.",
      resume: "Its pods start again.",
      delete: "The TrainJob, its pods and their logs are removed. This cannot be undone.",
    }[verb];
    document.getElementById("confirm-ok").textContent = what;
    dialog.returnValue = "";
    dialog.showModal();
    await new Promise((resolve) => dialog.addEventListener("close", resolve, { once: true }));
    if (dialog.returnValue !== "ok") return;
    try {
      const res = await api(`${base}/${verb}`, { method: "POST", headers: { "X-Kubetrain-CSRF": session.csrf } });
      toast(res.message);
      if (verb === "delete") location.hash = "#/";
      else refresh();
    } catch (e) {
      showBanner(`${what} failed: ${e.message}`);
    }
  }

  let logs = null;
  function drawTab() {
    if (tab === "overview") drawOverview();
    else if (tab === "logs") { if (!logs) logs = makeLogs(base, detail, panel); else logs.steps(detail); }
    else if (tab === "events") drawEvents();
    else if (tab === "yaml") drawYaml();
  }

  let overviewBuilt = false;
  const condBox = h("div", {}), stepBox = h("div", {}), podBox = h("div", {});
  function drawOverview() {
    if (!overviewBuilt) {
      overviewBuilt = true;
      panel.append(
        h("section", { class: "panel", "aria-labelledby": "h-curves" }, h("h2", { id: "h-curves" }, "Metrics"), charts.el),
        h("div", { class: "grid2" },
          h("section", { class: "panel", "aria-labelledby": "h-cond" }, h("h2", { id: "h-cond" }, "Conditions"), condBox),
          h("section", { class: "panel", "aria-labelledby": "h-steps" }, h("h2", { id: "h-steps" }, "Steps"), stepBox)),
        h("section", { class: "panel", "aria-labelledby": "h-pods" }, h("h2", { id: "h-pods" }, "Pods"), podBox));
    }
    condBox.textContent = "";
    condBox.append(detail.conditions.length ? table([
      { label: "Type", key: "type" },
      { label: "Status", render: (c) => badge(c.status) },
      { label: "Reason", key: "reason" },
      { label: "Message", cls: "msg", key: "message" },
    ], detail.conditions, { label: "Conditions" }) : h("p", { class: "muted" }, "No conditions yet."));
    stepBox.textContent = "";
    stepBox.append(detail.steps.length ? table([
      { label: "Step", render: (s) => h("a", { href: href("logs") + "?step=" + encodeURIComponent(s.name) }, s.name) },
      { label: "Phase", render: (s) => badge(s.phase) },
      { label: "Restarts", cls: "num", render: (s) => String(s.restarts) },
      { label: "Exit code", cls: "num", render: (s) => s.exitCode === null ? "" : String(s.exitCode) },
      { label: "Reason", key: "reason" },
    ], detail.steps, { label: "Steps" }) : h("p", { class: "muted" }, "No pods yet."));
    podBox.textContent = "";
    podBox.append(detail.pods.length ? table(["NAME", "READY", "STATUS", "RESTARTS", "EXIT CODE", "IP", "AGE"].map((k) => ({
      label: k.toLowerCase().replace(/^./, (c) => c.toUpperCase()),
      cls: ["RESTARTS", "EXIT CODE", "AGE", "READY"].includes(k) ? "num" : (k === "IP" ? "hide-sm" : null),
      render: k === "STATUS" ? (p) => badge(p.STATUS) : (p) => p[k] === "-" ? "" : p[k],
    })), detail.pods, { label: "Pods" }) : h("p", { class: "muted" }, "No pods yet."));
  }

  function drawEvents() {
    panel.textContent = "";
    panel.append(h("section", { class: "panel flush" }, detail.events.length ? table([
      { label: "Last seen", cls: "num", key: "LAST SEEN" },
      { label: "Type", render: (e) => h("span", { class: "badge " + (e.TYPE === "Warning" ? "s-Failed" : "s-Created") }, e.TYPE) },
      { label: "Reason", key: "REASON" },
      { label: "Object", key: "OBJECT" },
      { label: "Message", cls: "msg", key: "MESSAGE" },
    ], detail.events.slice().reverse(), { label: "Events" }) : h("div", { class: "empty" }, "No events.")));
  }

  let yamlChoice = "trainjob";
  function drawYaml() {
    panel.textContent = "";
    const choices = [["trainjob", "TrainJob"], ["runtime", `Runtime (${detail.yaml.runtimeName})`], ["rendered", "Rendered JobSet"]];
    const select = h("select", { id: "yaml-of" }, choices.map(([v, l]) => h("option", { value: v }, l)));
    select.value = yamlChoice;
    const text = detail.yaml[yamlChoice] || (yamlChoice === "runtime" ? "# the runtime was not found" : "# not created yet");
    select.addEventListener("change", () => { yamlChoice = select.value; drawYaml(); document.getElementById("yaml-of").focus(); });
    panel.append(h("div", { class: "logbar" }, h("label", { for: "yaml-of" }, "Object", select)),
      h("pre", { class: "code", tabindex: "0", "aria-label": "YAML" }, text));
  }

  stream(base + "/stream", {
    changed: () => refresh(),
    gone: () => refresh(),
    status: (m) => { if (m.error) showBanner(`Cannot read from the Kubernetes API: ${m.error}. Retrying…`); else refresh(); },
  });
  onCleanup(() => { if (logs) logs.close(); });
  refresh();
  if (charts) charts.update(); // in parallel with the details: the curves need nothing from them
}

// --- curves -------------------------------------------------------------------------------

const COLOURS = ["#1f5fbf", "#c2410c", "#15803d", "#7c3aed", "#b91c1c", "#0e7490"];

function makeCharts(base) {
  const el = h("div", { class: "charts", id: "charts" }, h("p", { class: "muted" }, "No metrics reported yet."));
  const data = { x: [], progress: [], metrics: {} };
  const plots = new Map();
  let last = 0, lastUpdated = null, busy = false, again = false;
  const ro = new ResizeObserver(() => {
    for (const [, p] of plots) p.setSize({ width: chartWidth(p.root.parentElement), height: 220 });
  });

  function chartWidth(box) { return Math.max(260, (box && box.clientWidth) || 400); }

  function series() {
    const out = Object.entries(data.metrics).map(([n, v]) => [n, v]);
    if (data.progress.some((v) => v !== null)) out.push(["progress %", data.progress]);
    return out;
  }

  function draw() {
    const t0 = performance.now();
    const list = series();
    if (!list.length) return;
    if (plots.size === 0) el.textContent = "";
    list.forEach(([n, ys], i) => {
      const d = [data.x, ys];
      let p = plots.get(n);
      if (p) { p.setData(d); return; }
      const box = h("div", { class: "chart", "data-metric": n, role: "img", "aria-label": `${n} over time` });
      el.append(box);
      p = new uPlot({
        title: n, width: chartWidth(box), height: 220,
        scales: { x: { time: true }, ...(n === "progress %" ? { y: { range: [0, 100] } } : {}) },
        series: [{}, { label: n, stroke: COLOURS[i % COLOURS.length], width: 2, spanGaps: true,
          points: { show: data.x.length < 60 } }],
        axes: [{ stroke: "#4d5a6b", grid: { stroke: "#eef1f5" } }, { stroke: "#4d5a6b", grid: { stroke: "#eef1f5" }, size: 60 }],
        legend: { show: true },
      }, d, box);
      plots.set(n, p);
      ro.observe(box);
    });
    // Timed to the next frame: uPlot commits its drawing in a microtask after setData.
    const n = data.x.length;
    requestAnimationFrame(() => {
      performance.measure("kt:charts-drawn", { start: t0, end: performance.now() });
      el.dataset.points = String(n);
    });
  }

  return {
    el,
    async update() {
      if (busy) { again = true; return; }
      busy = true;
      try {
        const m = await api(`${base}/metrics?after=${last}`);
        if (m.latestOnly) {
          // A cluster keeps only the latest report: the curve grows while this page watches.
          if (!m.x.length || m.updated[0] === lastUpdated) return;
          lastUpdated = m.updated[0];
          m.x = [Date.now() / 1000];
        }
        if (m.x.length) {
          for (const n of Object.keys(m.metrics)) if (!(n in data.metrics)) data.metrics[n] = data.x.map(() => null);
          // concat, not push(...): a spread of 100,000 arguments overflows the stack.
          for (const n of Object.keys(data.metrics)) data.metrics[n] = data.metrics[n].concat(m.metrics[n] || m.x.map(() => null));
          data.x = data.x.concat(m.x);
          data.progress = data.progress.concat(m.progress);
          if (!m.latestOnly) last = m.x[m.x.length - 1];
          draw();
        }
      } catch (e) {
        if (e.status !== 404) showBanner(`Metrics: ${e.message}`); // a missing job: the page says so
      } finally {
        busy = false;
        if (again) { again = false; this.update(); }
      }
    },
    destroy() { ro.disconnect(); for (const [, p] of plots) p.destroy(); },
  };
}

// --- logs ---------------------------------------------------------------------------------

const MAX_LINES = 20000;

function makeLogs(base, detail, panel) {
  const wanted = new URLSearchParams(location.hash.split("?")[1] || "").get("step");
  const select = h("select", { id: "log-step" });
  const follow = h("input", { id: "log-follow", type: "checkbox", checked: true });
  const search = h("input", { id: "log-search", type: "search", placeholder: "filter lines…", autocomplete: "off" });
  const status = h("span", { class: "count", "aria-live": "polite" });
  const pre = h("pre", { class: "log", id: "log", tabindex: "0", "aria-label": "log lines" });
  panel.textContent = "";
  panel.append(h("div", { class: "logbar" },
    h("label", { for: "log-step" }, "Step (rank)", select),
    h("label", { for: "log-search" }, "Search", search),
    h("label", { class: "inline", for: "log-follow" }, follow, "Follow"),
    status), pre);
  let lines = [], es = null, ended = false;

  function setSteps(d) {
    const names = d.steps.map((s) => s.name);
    const current = select.value || (names.includes(wanted) ? wanted : (names.includes("node-0") ? "node-0" : names[0]));
    select.textContent = "";
    for (const n of names) select.append(h("option", { value: n }, n));
    if (!names.length) select.append(h("option", { value: "node-0" }, "node-0 (not started)"));
    select.value = current || "node-0";
  }

  function paint() {
    const q = search.value;
    pre.textContent = "";
    const shown = q ? lines.filter((l) => l.includes(q)) : lines;
    const frag = document.createDocumentFragment();
    for (const l of shown) {
      if (q) {
        const parts = l.split(q);
        parts.forEach((part, i) => { frag.append(part); if (i < parts.length - 1) frag.append(h("mark", {}, q)); });
      } else {
        frag.append(l);
      }
      frag.append("\n");
    }
    pre.append(frag);
    status.textContent = (q ? `${shown.length} of ${lines.length} lines` : `${lines.length} lines`) + (ended ? " · ended" : " · streaming");
    if (follow.checked) pre.scrollTop = pre.scrollHeight;
  }

  function open() {
    if (es) es.close();
    lines = []; ended = false;
    pre.textContent = "";
    status.textContent = "connecting…";
    es = new EventSource(`${base}/logs?step=${encodeURIComponent(select.value)}`);
    es.addEventListener("lines", (e) => {
      lines.push(...JSON.parse(e.data));
      if (lines.length > MAX_LINES) lines = lines.slice(-MAX_LINES);
      paint();
    });
    es.addEventListener("failed", (e) => { showBanner(`Logs: ${JSON.parse(e.data).message}`); });
    es.addEventListener("end", () => { ended = true; es.close(); paint(); });
  }

  setSteps(detail);
  select.addEventListener("change", open);
  search.addEventListener("input", paint);
  follow.addEventListener("change", paint);
  open();
  return {
    steps(d) { const had = select.options.length; setSteps(d); if (!had || (ended && d.row.cells.STATE === "Running")) open(); },
    close() { if (es) es.close(); },
  };
}

// --- runtimes -----------------------------------------------------------------------------

async function runtimesPage() {
  document.title = "Runtimes · kubetrain";
  main.append(h("h1", {}, "Training runtimes"));
  const box = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  main.append(box);
  let body;
  try {
    body = await api("/api/runtimes");
  } catch (e) {
    box.textContent = "";
    box.append(h("div", { class: "panel empty", role: "alert" }, e.message));
    return;
  }
  box.textContent = "";
  if (!body.runtimes.length) box.append(h("div", { class: "panel empty" }, "No runtimes installed."));
  for (const rt of body.runtimes) {
    const c = rt.cells;
    const policy = Object.entries(rt.setup.mlPolicy).map(([k, v]) => {
      const fields = v && typeof v === "object" ? Object.entries(v).map(([f, x]) => `${f}=${x}`).join(", ") : String(v);
      return fields ? `${k} (${fields})` : k;
    }).join("; ");
    const group = Object.keys(rt.setup.podGroupPolicy).join(", ");
    box.append(h("section", { class: "panel runtime", "aria-label": `${c.KIND} ${c.NAME}` },
      h("h2", {}, c.NAME, h("span", { class: "badge s-Created" }, c.KIND), rt.namespace ? h("span", { class: "muted" }, `in ${rt.namespace}`) : null),
      h("div", { class: "kv" },
        h("span", {}, "Framework ", h("b", {}, c.FRAMEWORK)),
        h("span", {}, "Nodes ", h("b", {}, c.NODES)),
        policy ? h("span", {}, "ML policy ", h("b", {}, policy)) : null,
        group ? h("span", {}, "Gang scheduling ", h("b", {}, group)) : null,
        h("span", {}, "Age ", h("b", {}, c.AGE))),
      table([
        { label: "Replicated job", key: "job" },
        { label: "Replicas", cls: "num", render: (j) => String(j.replicas) },
        { label: "Container", key: "container" },
        { label: "Image", key: "image" },
        { label: "Command", cls: "msg hide-sm", key: "command" },
      ], rt.setup.containers, { label: `${c.NAME} containers` }),
      h("details", {}, h("summary", {}, "YAML"), h("pre", { class: "code", tabindex: "0" }, rt.yaml))));
  }
}

// --- Experiments (Katib) -----------------------------------------------------------------

const expHref = (ns, name) => `#/experiments/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`;

function experimentsPage() {
  document.title = "Experiments · kubetrain";
  const rows = new Map();
  let loaded = false;
  const nameInput = h("input", { id: "f-exp-name", type: "search", placeholder: "name contains…", autocomplete: "off" });
  const count = h("span", { class: "count", "aria-live": "polite" });
  const body = h("div", { class: "panel flush" }, h("div", { class: "empty" }, "Loading Experiments…"));
  main.append(h("h1", {}, "Experiments"),
    h("div", { class: "filters", role: "search", "aria-label": "Filter Experiments" },
      h("label", { for: "f-exp-name" }, "Name", nameInput), count),
    body);

  function render() {
    if (!loaded) return;
    const q = nameInput.value.trim().toLowerCase();
    const all = [...rows.values()];
    const hits = all.filter((r) => !q || r.cells.NAME.toLowerCase().includes(q));
    hits.sort((a, b) => (b.created || "").localeCompare(a.created || "") || a.key.localeCompare(b.key));
    const noun = all.length === 1 ? "Experiment" : "Experiments";
    count.textContent = hits.length === all.length ? `${all.length} ${noun}` : `${hits.length} of ${all.length} ${noun}`;
    body.textContent = "";
    if (!hits.length) {
      body.append(h("div", { class: "empty" }, all.length ? "No Experiment matches this name."
        : h("span", {}, "No Experiments yet. Start a search with ", h("code", {}, "kubetrain apply -f experiment.yaml"), " or ", h("code", {}, "kubetrain tune"), ".")));
      return;
    }
    const t = table([
      { label: "Name", cls: "name", render: (r) => h("a", { href: expHref(r.cells.NAMESPACE, r.cells.NAME) }, r.cells.NAME) },
      { label: "Namespace", cls: "hide-sm", render: (r) => r.cells.NAMESPACE },
      { label: "State", render: (r) => h("span", { title: [r.reason, r.message].filter(Boolean).join(": ") || null }, badge(r.cells.STATE)) },
      { label: "Algorithm", cls: "hide-sm", render: (r) => r.cells.ALGORITHM },
      { label: "Objective", cls: "hide-sm", render: (r) => r.cells.OBJECTIVE },
      { label: "Trials", cls: "num", render: (r) => r.cells.TRIALS },
      { label: "Running", cls: "num hide-sm", render: (r) => r.cells.RUNNING },
      { label: "Succeeded", cls: "num hide-sm", render: (r) => r.cells.SUCCEEDED },
      { label: "Failed", cls: "num hide-sm", render: (r) => r.cells.FAILED },
      { label: "Best", cls: "metric", render: (r) => r.cells.BEST === "-" ? "" : r.cells.BEST },
      { label: "Age", cls: "num", render: (r) => h("span", { "data-age": r.key }, r.cells.AGE) },
    ], hits, { label: "Experiments" });
    t.querySelectorAll("tbody tr").forEach((tr, i) => { tr.dataset.key = hits[i].key; });
    body.append(t);
  }

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  }
  nameInput.addEventListener("input", schedule);

  stream("/api/experiments/stream", {
    loading: () => setLive(true, "connecting…"),
    snapshot: (m) => {
      rows.clear();
      for (const r of m.rows) rows.set(r.key, r);
      loaded = true;
      showBanner(null);
      setLive(true, `live · ${session ? session.context : ""}`);
      render();
    },
    row: (m) => { rows.set(m.row.key, m.row); schedule(); },
    gone: (m) => { rows.delete(m.key); schedule(); },
    ages: (m) => {
      for (const [k, v] of Object.entries(m.ages)) { const r = rows.get(k); if (r) r.cells.AGE = v; }
      for (const el of body.querySelectorAll("[data-age]")) { const v = m.ages[el.dataset.age]; if (v) el.textContent = v; }
    },
    "api-error": (m) => {
      showBanner(`Cannot read Experiments: ${m.message}. Retrying…`);
      setLive(false, "API unreachable");
      if (!loaded) { body.textContent = ""; body.append(h("div", { class: "empty" }, "Waiting for the Kubernetes API…")); }
    },
  });
}

function experimentPage(ns, name) {
  document.title = `${name} · Experiment · kubetrain`;
  const base = `/api/experiments/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`;
  const header = h("div", {});
  const body = h("div", {});
  main.append(h("p", { class: "muted" }, h("a", { href: "#/experiments" }, "Experiments"), ` / ${ns} /`), header, body);
  const chart = makeObjectiveChart();
  onCleanup(() => chart.destroy());
  let built = false, refreshing = false, again = false;
  const condBox = h("div", {}), setupBox = h("div", {}), trialBox = h("div", {}), yamlBox = h("pre", { class: "code", tabindex: "0", "aria-label": "Experiment YAML" });

  async function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    try {
      const d = await api(base);
      showBanner(null);
      draw(d);
    } catch (e) {
      if (e.status === 404) {
        header.textContent = "";
        body.textContent = "";
        built = false;
        header.append(h("h1", {}, name), h("div", { class: "panel empty", role: "alert" },
          `There is no Experiment "${name}" in namespace "${ns}" (it may have been deleted). `, h("a", { href: "#/experiments" }, "See all Experiments.")));
      } else {
        showBanner(e.message);
      }
    } finally {
      refreshing = false;
      if (again) { again = false; setTimeout(refresh, 300); }
    }
  }

  function draw(d) {
    const r = d.row, c = r.cells;
    const best = d.trials.find((t) => t.best);
    header.textContent = "";
    header.append(
      h("h1", {}, name, badge(c.STATE)),
      h("p", { class: "muted", id: "exp-message", hidden: !r.message }, [r.reason, r.message].filter(Boolean).join(": ")),
      h("dl", { class: "summary" },
        card("Objective", c.OBJECTIVE),
        card("Algorithm", c.ALGORITHM),
        card("Trials", `${c.TRIALS} · ${d.budget.parallel ?? "?"} at a time`),
        card("Running / succeeded / failed", `${c.RUNNING} / ${c.SUCCEEDED} / ${c.FAILED}`),
        card("Best", best ? h("span", {}, `${c.BEST} `, h("span", { class: "muted" }, `(${best.name})`)) : "–"),
        card("Age", c.AGE)));
    if (!built) {
      built = true;
      body.textContent = "";
      body.append(
        h("section", { class: "panel", "aria-labelledby": "h-objective" }, h("h2", { id: "h-objective" }, `Objective over trials (${d.objective.type} ${d.objective.metric})`), chart.el),
        h("section", { class: "panel", "aria-labelledby": "h-trials" }, h("h2", { id: "h-trials" }, "Trials"), trialBox),
        h("div", { class: "grid2" },
          h("section", { class: "panel", "aria-labelledby": "h-cond" }, h("h2", { id: "h-cond" }, "Conditions"), condBox),
          h("section", { class: "panel", "aria-labelledby": "h-setup" }, h("h2", { id: "h-setup" }, "Search space"), setupBox)),
        h("section", { class: "panel" }, h("details", {}, h("summary", {}, "YAML"), yamlBox)));
    }
    chart.update(d);
    drawTrials(d);
    condBox.textContent = "";
    condBox.append(d.conditions.length ? table([
      { label: "Type", key: "type" },
      { label: "Status", render: (x) => badge(x.status) },
      { label: "Reason", key: "reason" },
      { label: "Message", cls: "msg", key: "message" },
    ], d.conditions, { label: "Conditions" }) : h("p", { class: "muted" }, "No conditions yet."));
    setupBox.textContent = "";
    const settings = Object.entries(d.algorithm.settings).map(([k, v]) => `${k}=${v}`).join(", ");
    setupBox.append(
      table([
        { label: "Parameter", key: "name" },
        { label: "Type", key: "type" },
        { label: "Space", key: "space" },
      ], d.parameters, { label: "Parameters" }),
      h("div", { class: "kv", style: "margin-top:.75rem" },
        h("span", {}, "Algorithm ", h("b", {}, d.algorithm.name + (settings ? ` (${settings})` : ""))),
        d.objective.goal !== null && d.objective.goal !== undefined ? h("span", {}, "Goal ", h("b", {}, String(d.objective.goal))) : null,
        d.objective.additional.length ? h("span", {}, "Also recorded ", h("b", {}, d.objective.additional.join(", "))) : null,
        d.budget.maxFailed !== null && d.budget.maxFailed !== undefined ? h("span", {}, "At most failed ", h("b", {}, String(d.budget.maxFailed))) : null));
    yamlBox.textContent = d.yaml;
  }

  function drawTrials(d) {
    trialBox.textContent = "";
    if (!d.trials.length) { trialBox.append(h("p", { class: "muted" }, "No trials yet.")); return; }
    const params = d.parameters.map((p) => p.name);
    const metrics = [d.objective.metric, ...d.objective.additional];
    for (const t of d.trials) for (const m of Object.keys(t.metrics)) if (!metrics.includes(m)) metrics.push(m);
    const t = table([
      { label: "#", cls: "num", render: (x) => String(d.trials.indexOf(x) + 1) },
      { label: "Trial", cls: "name", render: (x) => h("span", {}, x.trainjob
          ? h("a", { href: `#/jobs/${encodeURIComponent(ns)}/${encodeURIComponent(x.name)}`, title: "its TrainJob" }, x.name)
          : h("span", { title: "its TrainJob was deleted after the trial (trialTemplate.retain is false)" }, x.name),
        x.best ? h("span", { class: "badge s-best", title: "currentOptimalTrial" }, "★ best") : null) },
      { label: "State", render: (x) => badge(x.state) },
      ...params.map((p) => ({ label: p, cls: "num", render: (x) => x.parameters[p] })),
      ...metrics.map((m, i) => ({ label: i === 0 ? `${m} (objective)` : m, cls: "num", render: (x) => x.metrics[m] })),
    ], d.trials, { label: "Trials" });
    t.querySelectorAll("tbody tr").forEach((tr, i) => {
      tr.dataset.trial = d.trials[i].name;
      if (d.trials[i].best) { tr.classList.add("best"); tr.setAttribute("aria-label", `best trial ${d.trials[i].name}`); }
    });
    trialBox.append(t);
  }

  stream(base + "/stream", {
    changed: () => refresh(),
    gone: () => refresh(),
    status: (m) => { if (m.error) showBanner(`Cannot read Experiments: ${m.error}. Retrying…`); else refresh(); },
  });
  refresh();
}

// The objective of each trial (points, in creation order) and the best value so far (a step line).
function makeObjectiveChart() {
  const el = h("div", { class: "chart", id: "objective-chart", role: "img", "aria-label": "objective over trials" },
    h("p", { class: "muted" }, "No objective values reported yet."));
  let plot = null, last = "";
  const ro = new ResizeObserver(() => { if (plot) plot.setSize({ width: Math.max(260, el.clientWidth || 400), height: 240 }); });
  return {
    el,
    update(d) {
      const x = d.trials.map((_, i) => i + 1);
      const data = [x, d.series.objective, d.series.best];
      const key = JSON.stringify(data);
      if (key === last) return;
      last = key;
      if (!d.series.objective.some((v) => v !== null)) return;
      const n = d.series.objective.filter((v) => v !== null).length;
      el.dataset.points = String(n);
      // What the picture says, for screen readers (the trials table holds every value).
      const best = d.series.best[d.series.best.length - 1];
      el.setAttribute("aria-label", `${d.objective.metric} of ${n} trials; best so far ${best}`);
      if (plot) { plot.setData(data); return; }
      el.textContent = "";
      plot = new uPlot({
        width: Math.max(260, el.clientWidth || 400), height: 240,
        // Half a trial of room either side, so the first and last points are not on the frame.
        scales: { x: { time: false, range: (u, lo, hi) => [lo - 0.5, hi + 0.5] } },
        series: [
          { label: "trial" },
          { label: d.objective.metric, stroke: COLOURS[0], width: 0, paths: () => null, points: { show: true, size: 8, fill: COLOURS[0] } },
          { label: "best so far", stroke: COLOURS[2], width: 2, paths: uPlot.paths.stepped({ align: 1 }), points: { show: false } },
        ],
        axes: [{ stroke: "#4d5a6b", grid: { stroke: "#eef1f5" }, incrs: [1, 2, 5, 10, 20, 50, 100], values: (u, v) => v.map(String), label: "trial" },
          { stroke: "#4d5a6b", grid: { stroke: "#eef1f5" }, size: 60 }],
        legend: { show: true },
      }, data, el);
      ro.observe(el);
    },
    destroy() { ro.disconnect(); if (plot) plot.destroy(); },
  };
}

// --- start --------------------------------------------------------------------------------

async function start() {
  const nav = document.getElementById("nav");
  for (const s of SECTIONS) nav.append(h("a", { href: s.href, "data-nav": s.id }, s.label));
  try {
    session = await api("/api/session");
    setLive(true, `${session.local ? "local engine" : session.context} · ${session.server}`);
  } catch (e) {
    main.textContent = "";
    main.append(h("div", { class: "panel empty", role: "alert" }, e.status === 401
      ? "Your session has expired or the token is wrong. Open the URL printed by `kubetrain dashboard` again."
      : e.message));
    return;
  }
  window.addEventListener("hashchange", route);
  route();
}

start();

// tether dashboard: the apps list and one app's view, kept live by the server's
// event stream. Plain JavaScript, no dependencies, no build step: this file is what
// the browser runs. Every value from the API reaches the page through esc() or
// textContent, never as markup.
"use strict";

const TOKEN_KEY = "tether.apiToken";
const TREE_REFRESH_MS = 10000;
const FILTERS = [
  ["all", "All apps"],
  ["OutOfSync", "Out of sync"],
  ["Synced", "Synced"],
  ["unhealthy", "Not healthy"],
  ["failed", "Last pass failed"],
  ["paused", "Automation not acting"],
];

const state = {
  apps: new Map(), // name -> summary object
  order: [], // names, sorted
  filter: "all",
  query: "",
  app: null, // the full status of the app on screen
  route: { view: "apps" },
  waiters: [], // requests waiting for a token: { resolve, reject }
  shown: false, // whether a view has been rendered (else the page says "Loading…")
  declined: false, // the token prompt was closed without a token
  tree: null, // { app, body }: the last object tree read, shown until the next one
  collapsed: new Set(), // tree items the person collapsed, by key
  treeFocus: null, // the key of the tree item that takes the focus
};

const $ = (id) => document.getElementById(id);

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, (c) => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
  })[c]);
}

// --- API -------------------------------------------------------------------------

function headers() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: "Bearer " + token } : {};
}

// The person closed the token prompt: what asked for the token is abandoned.
class Cancelled extends Error {
  constructor() { super("no API token given"); }
}

// A request; a 401 asks for the token and tries again once it is given. A request
// the person did not ask for (`quiet`: the live stream, refreshes) does not ask again
// once they closed the prompt without a token.
async function api(path, { quiet = false, ...options } = {}) {
  for (;;) {
    const res = await fetch(path, { ...options, headers: { ...headers(), ...(options.headers || {}) } });
    if (res.status !== 401) return res;
    if (quiet && state.declined) throw new Cancelled();
    const had = sessionStorage.getItem(TOKEN_KEY);
    await askToken(had ? "The token was refused. Enter the token server.apiToken names." : null);
  }
}

function askToken(message) {
  const dialog = $("token-dialog");
  const text = $("token-message");
  if (message) {
    text.textContent = message;
    text.classList.add("error");
  }
  if (!dialog.open) {
    $("token-input").value = "";
    dialog.showModal();
    $("token-input").focus();
  }
  return new Promise((resolve, reject) => state.waiters.push({ resolve, reject }));
}

function setupToken() {
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const token = $("token-input").value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    state.declined = false;
    $("notice").textContent = "";
    $("token-dialog").close();
    $("token-message").classList.remove("error");
    const waiters = state.waiters.splice(0);
    waiters.forEach((w) => w.resolve());
    restartEvents();
  });
  $("token-cancel").addEventListener("click", () => $("token-dialog").close());
  // Closed without a token (Cancel, Escape): every request waiting for one gives up,
  // and the page stays as it was.
  $("token-dialog").addEventListener("close", () => {
    const waiters = state.waiters.splice(0);
    if (!waiters.length) return;
    state.declined = true;
    waiters.forEach((w) => w.reject(new Cancelled()));
    notify("No API token given: nothing was sent. Use “API token” to enter it.");
  });
  $("token-button").addEventListener("click", () => askToken(null).then(() => route(), () => {}));
}

function notify(message) {
  const box = $("notice");
  box.textContent = message;
  clearTimeout(notify.timer);
  notify.timer = setTimeout(() => { box.textContent = ""; }, 6000);
}

// --- Formatting ------------------------------------------------------------------

function badge(text, kind) {
  return `<span class="badge b-${kind}">${esc(text)}</span>`;
}

function syncBadge(s) {
  return badge(s || "Unknown", s === "Synced" ? "ok" : s === "OutOfSync" ? "warn" : "none");
}

function healthBadge(h) {
  const kind = { Healthy: "ok", Progressing: "info", Degraded: "bad", Missing: "warn" }[h] || "none";
  return badge(h || "Unknown", kind);
}

function resultBadge(r) {
  if (!r) return badge("no pass yet", "none");
  return badge(r, r === "Succeeded" ? "ok" : "bad");
}

function standingBadge(s) {
  const kind = { InSync: "ok", Modified: "warn", Missing: "warn", Extra: "info", Failed: "bad" }[s] || "none";
  return badge(s, kind);
}

function ago(ms) {
  if (ms == null) return "";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

function when(ms) {
  if (ms == null) return "";
  const iso = new Date(ms).toISOString();
  return `<time datetime="${iso}" title="${iso}">${esc(ago(ms))}</time>`;
}

function duration(ms) {
  if (ms == null) return "";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

function revision(sha, subject, prefix) {
  if (!sha) return '<span class="muted">none yet</span>';
  // A commit's first 7 digits; a chart source's `chart@version` (no commit to link).
  const commit = /^[0-9a-f]{40}$/i.test(sha);
  const short = esc(commit ? sha.slice(0, 7) : sha.replace(/@sha256:[0-9a-f]+$/, ""));
  const code = prefix && commit
    ? `<a class="mono" href="${esc(prefix + sha)}" rel="noreferrer" title="Open the commit on its provider">${short}</a>`
    : `<code>${short}</code>`;
  return `${code} <span class="subject" title="${esc(subject)}">${esc(subject)}</span>`;
}

function automation(acting, reason) {
  return acting ? badge("acting", "ok") : `${badge("not acting", "warn")} <span class="muted small">${esc(reason)}</span>`;
}

function value(v) {
  if (v === undefined) return '<span class="muted">(absent)</span>';
  return `<code>${esc(JSON.stringify(v))}</code>`;
}

function changedBy(by) {
  if (!by) return '<span class="muted">unknown</span>';
  const t = by.time ? ` <time datetime="${esc(by.time)}" title="${esc(by.time)}">at ${esc(by.time.replace("T", " ").replace("Z", " UTC"))}</time>` : "";
  return `<code>${esc(by.manager)}</code> <span class="muted small">(${esc(by.operation)})</span>${t}`;
}

// --- Apps view -------------------------------------------------------------------

function fromRow(columns, repos, row) {
  const app = {};
  columns.forEach((c, i) => { app[c] = row[i]; });
  app.repo = app.repo >= 0 ? repos[app.repo] : null;
  return app;
}

async function loadApps() {
  const res = await api("/api/v1/apps?view=summary");
  if (!res.ok) throw new Error(`the app list answered ${res.status}`);
  const body = await res.json();
  state.apps = new Map();
  for (const row of body.apps) {
    const app = fromRow(body.columns, body.repos, row);
    state.apps.set(app.name, app);
  }
  state.order = [...state.apps.keys()].sort();
}

function matches(app) {
  if (state.query && !app.name.toLowerCase().includes(state.query)) return false;
  switch (state.filter) {
    case "OutOfSync": return app.sync === "OutOfSync";
    case "Synced": return app.sync === "Synced";
    case "unhealthy": return app.health !== "Healthy";
    case "failed": return app.result && app.result !== "Succeeded";
    case "paused": return !app.acting;
    default: return true;
  }
}

function appRow(a) {
  const name = esc(a.name);
  return `<tr data-app="${name}">
<th scope="row"><a href="#/apps/${encodeURIComponent(a.name)}">${name}</a></th>
<td>${syncBadge(a.sync)}</td><td>${healthBadge(a.health)}</td>
<td>${revision(a.sha, a.subject, a.repo)}</td>
<td>${resultBadge(a.result)} <span class="small muted">${when(a.finishedAt)}${a.durationMs != null ? " · " + duration(a.durationMs) : ""}</span></td>
<td class="num">${a.drifted}</td>
<td class="hide-narrow">${automation(a.acting, a.reason)}</td></tr>`;
}

function renderAppsShell() {
  const options = FILTERS.map(([v, l]) => `<option value="${v}"${v === state.filter ? " selected" : ""}>${l}</option>`).join("");
  $("main").innerHTML = `<h1>Apps</h1>
<div class="toolbar">
  <label>Search by name<input type="search" id="search" value="${esc(state.query)}" placeholder="app name" autocomplete="off"></label>
  <label>Show<select id="filter">${options}</select></label>
  <span id="count" class="muted" role="status" aria-live="polite"></span>
</div>
<table id="apps"><caption>Every app tether serves, with where it stands against Git.</caption>
<thead><tr><th scope="col">App</th><th scope="col">Sync</th><th scope="col">Health</th>
<th scope="col">Revision</th><th scope="col">Last pass</th><th scope="col" class="num">Drifted</th>
<th scope="col" class="hide-narrow">Automation</th></tr></thead><tbody id="app-rows"></tbody></table>`;
  $("search").addEventListener("input", (e) => { state.query = e.target.value.trim().toLowerCase(); renderRows(); });
  $("filter").addEventListener("change", (e) => { state.filter = e.target.value; renderRows(); });
  renderRows();
}

function renderRows() {
  const body = $("app-rows");
  if (!body) return;
  // Rendered now: a render still scheduled has nothing left to do, and a flag left
  // set would hold back every later row update (updateRow waits for it).
  rowsPending = false;
  const focused = document.activeElement?.closest?.("tr[data-app]")?.dataset.app;
  const shown = state.order.map((n) => state.apps.get(n)).filter(matches);
  body.innerHTML = shown.map(appRow).join("") ||
    `<tr><td colspan="7" class="muted">No app matches.</td></tr>`;
  const total = state.apps.size;
  const apps = (n) => `${n} app${n === 1 ? "" : "s"}`;
  $("count").textContent = shown.length === total ? apps(total) : `${shown.length} of ${apps(total)}`;
  if (focused) body.querySelector(`tr[data-app="${CSS.escape(focused)}"] a`)?.focus();
}

// One app changed: its row alone is replaced when it stays in view, so an event
// costs the same with ten apps or ten thousand.
function updateRow(app) {
  const body = $("app-rows");
  if (!body || rowsPending) return scheduleRows();
  const row = body.querySelector(`tr[data-app="${CSS.escape(app.name)}"]`);
  const show = matches(app);
  if (!row && !show) return;
  if (!row || !show) return scheduleRows();
  const focused = row.contains(document.activeElement);
  const t = document.createElement("template");
  t.innerHTML = appRow(app);
  const fresh = t.content.firstElementChild;
  row.replaceWith(fresh);
  if (focused) fresh.querySelector("a")?.focus();
}

// A burst of events renders the rows once, at the next animation frame; a page that
// gets no frames (a background tab, a headless browser) would then never render them,
// so a timer renders them too, whichever comes first.
const ROWS_FALLBACK_MS = 100;
let rowsPending = false;
function scheduleRows() {
  if (rowsPending) return;
  rowsPending = true;
  const render = () => { if (rowsPending) renderRows(); };
  requestAnimationFrame(render);
  setTimeout(render, ROWS_FALLBACK_MS);
}

// --- App view --------------------------------------------------------------------

async function loadApp(name) {
  const res = await api(`/api/v1/apps/${encodeURIComponent(name)}`);
  if (res.status === 404) return null;
  if (!res.ok) throw new Error(`the app answered ${res.status}`);
  return res.json();
}

async function loadTree(name) {
  const res = await api(`/api/v1/apps/${encodeURIComponent(name)}/tree`, { quiet: true });
  if (!res.ok) throw new Error(`the object tree answered ${res.status}`);
  return res.json();
}

// The app's objects as a tree (WAI-ARIA tree pattern): kinds, then each object of
// the app, then what its controllers made (ReplicaSets, Pods, Jobs) by
// ownerReferences. The app's own objects show their standing and health, the rest
// their health. Until the tree is read, the status's own objects stand in.
function nodeKey(n) {
  return n.managed || !n.uid ? `${n.kind}/${n.namespace || ""}/${n.name}` : n.uid;
}

function treeItem(n, level) {
  const key = nodeKey(n);
  const kids = n.children || [];
  const open = kids.length > 0 && !state.collapsed.has(key);
  const badges = n.managed ? `${standingBadge(n.status)} ${healthBadge(n.health)}` : healthBadge(n.health);
  const more = n.omitted ? `<li role="none" class="muted small">and ${n.omitted} more</li>` : "";
  const group = kids.length ? `<ul role="group"${open ? "" : " hidden"}>${kids.map((c) => treeItem(c, level + 1)).join("")}${more}</ul>` : "";
  return `<li role="treeitem" tabindex="-1" aria-level="${level}" data-key="${esc(key)}"${kids.length ? ` aria-expanded="${open}"` : ""}>
<span class="node">${badges} <span class="kind">${esc(n.kind)}</span>
<span class="mono">${esc(n.namespace ? n.namespace + "/" : "")}${esc(n.name)}</span>
${n.healthMessage ? `<span class="muted small">${esc(n.healthMessage)}</span>` : ""}</span>${group}</li>`;
}

function objectTree(name, roots, errors) {
  const byKind = new Map();
  for (const r of roots) {
    if (!byKind.has(r.kind)) byKind.set(r.kind, []);
    byKind.get(r.kind).push(r);
  }
  const kinds = [...byKind.keys()].sort();
  if (!kinds.length) return '<p class="muted">No objects yet.</p>';
  const items = kinds.map((k) => {
    const key = `kind:${k}`;
    const open = !state.collapsed.has(key);
    return `<li role="treeitem" tabindex="-1" aria-level="1" data-key="${esc(key)}" aria-expanded="${open}">
<span class="node"><strong>${esc(k)}</strong> <span class="muted small">(${byKind.get(k).length})</span></span>
<ul role="group"${open ? "" : " hidden"}>${byKind.get(k).map((n) => treeItem(n, 2)).join("")}</ul></li>`;
  }).join("");
  const partial = (errors || []).length
    ? `<p class="small b-warn badge" role="note">Partial: ${esc(errors.join("; "))}</p>` : "";
  return `${partial}<ul class="tree" role="tree" id="object-tree" aria-label="Objects of ${esc(name)}, by kind and owner">${items}</ul>`;
}

// The key of the tree item that has the focus, if one has.
function focusedTreeKey() {
  const active = document.activeElement;
  return active?.closest?.("#object-tree") ? active.dataset.key : null;
}

function renderTree(name, body, focusKey) {
  const box = $("objects");
  if (!box) return;
  const focused = focusKey || focusedTreeKey();
  box.innerHTML = objectTree(name, body.roots, body.errors);
  const items = [...box.querySelectorAll('[role="treeitem"]')];
  if (!items.length) return;
  const key = focused || state.treeFocus;
  const current = items.find((i) => i.dataset.key === key && visible(i)) || items[0];
  current.tabIndex = 0;
  if (focused) current.focus();
  box.querySelector('[role="tree"]').addEventListener("keydown", treeKeys);
  box.querySelector('[role="tree"]').addEventListener("click", (e) => {
    const item = e.target.closest('[role="treeitem"]');
    if (!item) return;
    moveTo(item);
    toggle(item);
  });
}

function visible(item) {
  return !item.closest("[hidden]");
}

function moveTo(item) {
  const tree = item.closest('[role="tree"]');
  tree.querySelectorAll('[role="treeitem"]').forEach((i) => { i.tabIndex = -1; });
  item.tabIndex = 0;
  item.focus();
  state.treeFocus = item.dataset.key;
}

function toggle(item, open) {
  if (!item.hasAttribute("aria-expanded")) return false;
  const now = item.getAttribute("aria-expanded") === "true";
  const next = open ?? !now;
  if (next === now) return false;
  item.setAttribute("aria-expanded", String(next));
  item.querySelector(':scope > [role="group"]').hidden = !next;
  if (next) state.collapsed.delete(item.dataset.key);
  else state.collapsed.add(item.dataset.key);
  return true;
}

function treeKeys(e) {
  const item = e.target.closest('[role="treeitem"]');
  if (!item) return;
  const shown = [...e.currentTarget.querySelectorAll('[role="treeitem"]')].filter(visible);
  const at = shown.indexOf(item);
  const go = (i) => { if (shown[i]) moveTo(shown[i]); };
  switch (e.key) {
    case "ArrowDown": go(at + 1); break;
    case "ArrowUp": go(at - 1); break;
    case "Home": go(0); break;
    case "End": go(shown.length - 1); break;
    case "ArrowRight":
      if (!toggle(item, true)) {
        const child = item.querySelector(':scope > [role="group"] > [role="treeitem"]');
        if (child && item.getAttribute("aria-expanded") === "true") moveTo(child);
      }
      break;
    case "ArrowLeft":
      if (!toggle(item, false)) {
        const parent = item.parentElement.closest('[role="treeitem"]');
        if (parent) moveTo(parent);
      }
      break;
    case "Enter": case " ": toggle(item); break;
    default: return;
  }
  e.preventDefault();
}

async function refreshTree(name) {
  try {
    const body = await loadTree(name);
    state.tree = { app: name, body };
    if (state.route.view === "app" && state.route.name === name) renderTree(name, body);
  } catch (e) {
    if (e instanceof Cancelled) return;
    const box = $("objects");
    if (box && !box.querySelector('[role="tree"]')) notify(`Could not read the object tree: ${e.message}`);
  }
}

// The object's unified diff when the status has it, else one hunk per field.
function diffLines(changes, text) {
  if (text) {
    const kind = (l) => l.startsWith("@@") ? "hunk" : l.startsWith("+++") || l.startsWith("---") ? "hunk"
      : l.startsWith("-") ? "del" : l.startsWith("+") ? "add" : "";
    const body = text.replace(/\n$/, "").split("\n")
      .map((l) => `<span class="${kind(l)}">${esc(l) || " "}</span>`).join("");
    return `<pre class="diff" aria-label="Unified diff, live to desired">${body}</pre>`;
  }
  const lines = [];
  for (const c of changes) {
    lines.push(`<span class="hunk">@@ ${esc(c.path)} @@</span>`);
    if (c.live !== undefined) lines.push(`<span class="del">- ${esc(c.path)}: ${esc(JSON.stringify(c.live))}</span>`);
    if (c.desired !== undefined) lines.push(`<span class="add">+ ${esc(c.path)}: ${esc(JSON.stringify(c.desired))}</span>`);
  }
  return `<pre class="diff" aria-label="Changes as a diff, live to desired">${lines.join("")}</pre>`;
}

function driftedObject(d) {
  const title = `${d.kind} ${d.namespace ? d.namespace + "/" : ""}${d.name}`;
  const rows = (d.changes || []).map((c) => `<tr><th scope="row"><code>${esc(c.path)}</code></th>
<td>${value(c.live)}</td><td>${value(c.desired)}</td><td>${changedBy(c.changedBy)}</td></tr>`).join("");
  const table = rows ? `<table><thead><tr><th scope="col">Field</th><th scope="col">Live</th>
<th scope="col">In Git</th><th scope="col">Changed by</th></tr></thead><tbody>${rows}</tbody></table>
${diffLines(d.changes, d.diff)}` : `<p class="small" style="padding:0 12px">${esc(d.message || "")}</p>`;
  return `<section class="object" aria-label="${esc(title)}"><h3>${standingBadge(d.status)} ${esc(title)}</h3>${table}</section>`;
}

function renderApp(a) {
  // From the API, the App's spec or the file: each says "suspended …".
  const suspended = !a.automation.acting && /^suspended/.test(a.automation.reason || "");
  // The file's `suspend: true` is lifted in the file only: the API refuses a Resume.
  const declared = suspended && /^suspended \(suspend: true\)/.test(a.automation.reason);
  const pass = a.lastPass;
  const conditions = a.conditions.map((c) => `<tr><th scope="row">${esc(c.type)}</th><td>${esc(c.status)}</td>
<td>${esc(c.reason)}</td><td>${esc(c.message)}</td><td>${when(Date.parse(c.lastTransitionTime))}</td></tr>`).join("");
  const history = (a.history || []).map((p) => `<tr><td>${when(Date.parse(p.finishedAt))}</td><td>${resultBadge(p.result)}</td>
<td class="num">${duration(p.durationMs)}</td><td class="num">${p.changed}</td><td class="small">${esc(p.error || "")}</td></tr>`).join("");
  const rev = a.revision;
  const pin = a.pin;
  // A rollback may go back to any applied revision but the one the app is at.
  const current = pin ? pin.revision : a.appliedRevision;
  const applied = (a.appliedRevisions || []).map((r) => `<tr><td>${revision(r.sha, r.subject, a.commitUrlPrefix)}</td>
<td>${when(Date.parse(r.appliedAt))}</td><td>${r.sha === current ? '<span class="muted">current</span>'
    : `<button type="button" class="rollback" data-sha="${esc(r.sha)}">Roll back</button>`}</td></tr>`).join("");
  const actions = (a.actions || []).map((x) => `<tr><td>${when(Date.parse(x.at))}</td><td>${esc(x.action)}</td>
<td>${esc(x.by)}</td></tr>`).join("");
  const treeKey = focusedTreeKey();
  $("main").innerHTML = `<h1><span>${esc(a.name)}</span> ${syncBadge(a.sync)} ${healthBadge(a.health)}
<span class="actions"><button type="button" id="sync" class="primary">Sync</button>
<button type="button" id="suspend"${declared ? ' disabled title="Suspended by the configuration file (suspend: true): resume it there"' : ""}>${suspended ? "Resume" : "Suspend"}</button></span></h1>
<dl class="summary">
<div><dt>Revision</dt><dd>${rev ? revision(rev.sha, rev.subject, a.commitUrlPrefix) : revision(null)}</dd></div>
<div><dt>Last pass</dt><dd>${pass ? `${resultBadge(pass.result)} ${when(Date.parse(pass.finishedAt))} · ${duration(pass.durationMs)}` : resultBadge(null)}</dd></div>
<div><dt>Objects</dt><dd>${a.objects}</dd></div>
<div><dt>Drifted</dt><dd id="drift-count">${a.drifted.length}</dd></div>
<div><dt>Automation</dt><dd>${automation(a.automation.acting, a.automation.reason)}</dd></div>
</dl>
${pin ? `<p class="badge b-warn" id="pinned">Pinned to ${esc(pin.revision.slice(0, 12))} ${esc(pin.subject)} by ${esc(pin.by)}
${when(Date.parse(pin.at))}${pin.reason ? `: ${esc(pin.reason)}` : ""}${pin.untilGitMovesFrom ? " (until Git's head moves)" : ""}
<button type="button" id="unpin">Unpin</button></p>` : ""}
${pass && pass.error ? `<p class="b-bad badge">${esc(pass.error)}</p>` : ""}
<h2>Drift</h2>
<div id="drift">${a.drifted.length ? a.drifted.map(driftedObject).join("") : '<p class="muted">Nothing differs from Git.</p>'}</div>
<div class="grid"><section><h2>Objects</h2><div id="objects"></div></section>
<section><h2>Conditions</h2><table><thead><tr><th scope="col">Type</th><th scope="col">Status</th><th scope="col">Reason</th>
<th scope="col">Message</th><th scope="col">Since</th></tr></thead><tbody>${conditions}</tbody></table>
<h2>Last passes</h2><table id="history"><caption>Newest first, up to 50.</caption><thead><tr><th scope="col">When</th><th scope="col">Result</th>
<th scope="col" class="num">Took</th><th scope="col" class="num">Changed</th><th scope="col">Error</th></tr></thead>
<tbody>${history || '<tr><td colspan="5" class="muted">No pass yet.</td></tr>'}</tbody></table>
<h2>Recent actions</h2><table id="actions"><caption>Taken through this replica's API, newest first, up to 20.</caption>
<thead><tr><th scope="col">When</th><th scope="col">Action</th><th scope="col">By</th></tr></thead>
<tbody>${actions || '<tr><td colspan="3" class="muted">None yet.</td></tr>'}</tbody></table>
<h2>Applied revisions</h2><table id="applied"><caption>Newest first: a rollback syncs one and holds the app there.</caption>
<thead><tr><th scope="col">Revision</th><th scope="col">Applied</th><th scope="col">Action</th></tr></thead>
<tbody>${applied || '<tr><td colspan="3" class="muted">None applied yet.</td></tr>'}</tbody></table></section></div>`;
  state.shown = true;
  // The last tree read stays until the next one arrives.
  if (state.tree && state.tree.app === a.name) renderTree(a.name, state.tree.body, treeKey);
  else renderTree(a.name, { roots: (a.resources || []).map((r) => ({ ...r, managed: true, children: [] })) }, treeKey);
  refreshTree(a.name);
  $("sync").addEventListener("click", () => act(a.name, "sync", "Sync requested"));
  $("suspend").addEventListener("click", () => act(a.name, suspended ? "resume" : "suspend", suspended ? "Resumed" : "Suspended"));
  if (pin) $("unpin").addEventListener("click", (e) => act(a.name, "unpin", "Unpinned", {}, e.target));
  for (const button of document.querySelectorAll("#applied button.rollback")) {
    button.addEventListener("click", () => {
      const reason = window.prompt(`Roll ${a.name} back to ${button.dataset.sha.slice(0, 12)} and hold it there? Why:`, "");
      if (reason !== null) act(a.name, "rollback", "Rolled back", { revision: button.dataset.sha, reason }, button);
    });
  }
}

async function act(name, action, done, body = {}, button = $(action === "sync" ? "sync" : "suspend")) {
  if (button) button.disabled = true;
  try {
    // JSON, as the API asks of every change (a cross-site form cannot send it).
    const res = await api(`/api/v1/apps/${encodeURIComponent(name)}/${action}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    const answer = await res.json().catch(() => ({}));
    notify(res.ok ? `${done}: ${name}` : `${action} refused: ${answer.error || res.status}`);
  } catch (e) {
    notify(e instanceof Cancelled ? `${action} cancelled: no API token given` : `${action} failed: ${e.message}`);
  } finally {
    if (button) button.disabled = false;
  }
}

let appPending = null;
function scheduleApp(name) {
  if (appPending) return;
  appPending = setTimeout(async () => {
    appPending = null;
    if (state.route.view !== "app" || state.route.name !== name) return;
    const a = await loadApp(name).catch(() => null);
    if (a && state.route.view === "app" && state.route.name === name) {
      const focused = document.activeElement?.id;
      renderApp(a);
      if (focused) $(focused)?.focus();
    }
  }, 50);
}

// --- Live updates ----------------------------------------------------------------

let events = null;

function setLive(on, text) {
  const live = $("live");
  live.className = "live " + (on ? "on" : "off");
  live.textContent = text;
}

function onEvent(type, data) {
  if (type === "app") {
    const app = JSON.parse(data);
    const known = state.apps.has(app.name);
    if (!known) state.order = [...state.order, app.name].sort();
    state.apps.set(app.name, app);
    if (state.route.view === "apps") known ? updateRow(app) : scheduleRows();
    if (state.route.view === "app" && state.route.name === app.name) scheduleApp(app.name);
  } else if (type === "removed") {
    const name = JSON.parse(data);
    state.apps.delete(name);
    state.order = state.order.filter((n) => n !== name);
    if (state.route.view === "apps") scheduleRows();
  } else if (type === "reset") {
    route();
  }
}

// Server-sent events over fetch, as EventSource cannot send the Authorization header.
async function streamEvents(signal) {
  const res = await api("/api/v1/events", { signal, quiet: true, headers: { Accept: "text/event-stream" } });
  if (!res.ok || !res.body) throw new Error(`the event stream answered ${res.status}`);
  setLive(true, "live");
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value: chunk, done } = await reader.read();
    if (done) return;
    buffer += chunk;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let type = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) type = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (data.length) onEvent(type, data.join("\n"));
    }
  }
}

function restartEvents() {
  if (events) events.abort();
  const controller = new AbortController();
  events = controller;
  (async () => {
    let first = true;
    while (!controller.signal.aborted) {
      try {
        // A reconnect may have missed changes: reload what is on screen.
        if (!first) await route();
        first = false;
        await streamEvents(controller.signal);
      } catch (e) {
        if (controller.signal.aborted) return;
        // No token given: the stream waits for one (entering it restarts it).
        if (e instanceof Cancelled) {
          setLive(false, "paused: no API token");
          return;
        }
      }
      setLive(false, "reconnecting");
      await new Promise((r) => setTimeout(r, 1000));
    }
  })();
}

// --- Routing ---------------------------------------------------------------------

function parseRoute() {
  const m = location.hash.match(/^#\/apps\/(.+)$/);
  return m ? { view: "app", name: decodeURIComponent(m[1]) } : { view: "apps" };
}

async function route() {
  state.route = parseRoute();
  const crumbs = $("crumbs");
  try {
    if (state.route.view === "app") {
      const name = state.route.name;
      crumbs.innerHTML = `<a href="#/">Apps</a> / ${esc(name)}`;
      document.title = `${name} · tether`;
      const a = await loadApp(name);
      if (state.route.name !== name) return;
      if (!a) {
        $("main").innerHTML = `<h1>No app named ${esc(name)}</h1><p><a href="#/">All apps</a></p>`;
        return;
      }
      renderApp(a);
    } else {
      crumbs.textContent = "";
      document.title = "tether";
      await loadApps();
      if (state.route.view !== "apps") return;
      renderAppsShell();
      state.shown = true;
      if (!performance.getEntriesByName("apps-rendered").length) performance.mark("apps-rendered");
    }
  } catch (e) {
    if (e instanceof Cancelled) {
      // What was on screen stays; a page with nothing yet says what it needs.
      if (!state.shown) {
        $("main").innerHTML = `<h1>API token needed</h1>
<p>This server shows its apps to whoever has the token its configuration names (<code>server.apiToken</code>).</p>
<p><button type="button" id="token-again" class="primary">Enter the API token</button></p>`;
        $("token-again").addEventListener("click", () => askToken(null).then(() => route(), () => {}));
      }
      return;
    }
    $("main").innerHTML = `<p class="b-bad badge">Could not load: ${esc(e.message)}</p>`;
  }
}

window.addEventListener("hashchange", async () => {
  await route();
  // A new view starts at its top, with the focus where a screen reader reads on.
  window.scrollTo(0, 0);
  $("main").focus({ preventScroll: true });
});

// Minutes-ago labels age without any event.
setInterval(() => {
  if (state.route.view === "apps") scheduleRows();
}, 30000);

// What controllers make (Pods coming and going) changes no app's status, so an open
// app view reads its tree again now and then, while the tab is in sight.
setInterval(() => {
  if (state.route.view === "app" && !document.hidden) refreshTree(state.route.name);
}, TREE_REFRESH_MS);

// Logged in with OIDC (server.oidc): who, and the way out. Without OIDC there is no
// such route, and nothing shows.
fetch("/oidc/session").then((r) => (r.ok ? r.json() : null)).then((me) => {
  if (!me) return;
  $("who").textContent = me.user;
  $("who").hidden = false;
  $("logout").hidden = false;
}, () => {});

setupToken();
route();
restartEvents();

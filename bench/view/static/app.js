// bench view: a hash-routed single page over the JSON API (/api/...). Every view's state is in the URL's hash,
// so a copied URL opens the same view. No build step, no dependency. Everything recorded (answers, prompts, ids)
// is put in the page as text (el() appends strings as text nodes), never as HTML.
"use strict";

const main = document.getElementById("main");
const COLUMNS = [
  ["run", "run"], ["model", "model"], ["suite", "suite"], ["test", "test"], ["epoch", "epoch", "num"],
  ["passed", "result"], ["failure_type", "failure"], ["score", "score", "num"], ["ttft_us", "TTFT ms", "num"],
  ["e2el_us", "E2EL ms", "num"], ["tokens", "tokens", "num"], ["retries", "retries", "num"], ["flags", "notes"],
  ["task_s", "task s", "num"], ["calls", "calls vs reference"],
];
const VERDICTS = [["", "any result"], ["pass", "pass"], ["fail", "fail"], ["errored", "errored"], ["unscored", "unscored"]];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) if (c !== null && c !== undefined && c !== false) node.append(c instanceof Node ? c : String(c));
  return node;
}

// Replace the view with these children (arrays flattened, empty parts left out).
function show(...children) {
  main.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

async function api(path, params) {
  const url = "api/" + path + (params ? "?" + new URLSearchParams(params) : "");
  const response = await fetch(url);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

const ms = (us) => (us === null || us === undefined ? "" : (us / 1000).toFixed(1));
const int = (n) => (n === null || n === undefined ? "?" : n.toLocaleString("en-US"));
const bytes = (n) => (n < 1024 ? `${n} B` : n < 1 << 20 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / (1 << 20)).toFixed(1)} MiB`);
const pct = (x) => (100 * x).toFixed(1) + "%";
const link = (view, params, text) => el("a", { href: "#/" + view + "?" + new URLSearchParams(params) }, text);
const resultKey = (r) => ({ run: r.run, model: r.model, test: r.test, epoch: r.epoch });
// A result's verdict: pass or fail when scored; otherwise what it is (errored in transport, unscored...), never blank.
function verdict(p, status) {
  if (p === true) return el("span", { class: "pass" }, "pass");
  if (p === false) return el("span", { class: "fail" }, "fail");
  if (status && status !== "scored") return el("span", { class: "status " + status }, status);
  return "–";
}

let liveSource = null;  // the live view's EventSource, closed when another view is shown

// `quiet` (true): the same view drawn again (a search filling in), without "loading…" in between.
function route(quiet) {
  if (liveSource) { liveSource.close(); liveSource = null; }
  const hash = location.hash.slice(2) || "runs";
  const [view, query] = hash.split("?");
  const params = Object.fromEntries(new URLSearchParams(query || ""));
  const views = { runs: showRuns, results: showResults, result: showResult, compare: showCompare, pair: showPair, load: showLoad, live: showLive, flow: showFlow };
  if (quiet !== true) show("loading…");
  (views[view] || showRuns)(params)
    .catch((err) => show(el("p", { class: "error" }, err.message)))
    // The frame after a view is drawn: benchmarks/view_speed.py reads this mark as the view's time to first paint.
    .then(() => requestAnimationFrame(() => performance.mark("bench-view-painted")));
}
window.addEventListener("hashchange", route);
window.addEventListener("load", route);

let facetsCache = null;
async function facets() {
  if (!facetsCache) facetsCache = await api("runs");
  return facetsCache;
}

// What the numbers cannot show (interrupted runs, replayed timing, streams cut without a finish_reason), above
// every view that shows numbers.
const warningsView = (warnings) => (warnings || []).map((w) => el("p", { class: "warn" }, "Warning: " + w));

async function showRuns() {
  const { runs, warnings, live } = await facets();
  const rows = runs.flatMap((run) =>
    run.models.map((m) =>
      el("tr", {},
        el("td", {}, link("results", { run: run.id }, run.id)),
        el("td", {}, link("results", { run: run.id, model: m.model }, m.model)),
        el("td", { class: "num" }, m.n ? `${m.passed}/${m.n}` : "unscored"),
        el("td", { class: "num" }, m.n ? pct(m.rate) : ""),
        el("td", { class: "num" }, m.n ? `${pct(m.low)} – ${pct(m.high)}` : ""),
        el("td", {}, el("pre", {}, JSON.stringify(run.settings))),
        el("td", {}, run.fingerprints.join(", ")),
        el("td", {}, (run.catalog_hash || "").slice(0, 12)),
        el("td", {}, run.source))));
  show(
    el("h2", {}, "Runs"),
    ...warningsView(warnings),
    live ? el("p", {}, "Following ", el("code", {}, live), ": ", link("live", {}, "live traffic")) : null,
    runs.length ? el("div", { class: "scroll" }, el("table", { id: "runs" },
      el("tr", {}, ["run", "model", "passed", "pass rate", "95% Wilson", "settings", "fingerprints", "catalog", "source"].map((h) => el("th", {}, h))),
      rows)) : el("p", {}, "No scored results were given."));
}

async function showResults(params) {
  const { facets: f, warnings } = await facets();
  const page = await api("results", params);
  const set = (changes) => {
    const next = { ...params, ...changes };
    for (const k of Object.keys(next)) if (next[k] === "" || next[k] === undefined) delete next[k];
    location.hash = "#/results?" + new URLSearchParams(next);
  };
  const choose = (name, options) =>
    el("select", { name, onchange: (e) => set({ [name]: e.target.value, offset: 0 }) },
      options.map(([v, label]) => { const o = el("option", { value: v }, label); if ((params[name] || "") === v) o.selected = true; return o; }));
  // An empty value (results scored by rules have no run id) is "any" here: such results are under "any run".
  const select = (name, values) => choose(name, [["", `any ${name}`], ...values.filter((v) => v).map((v) => [v, v])]);
  const search = el("input", { name: "q", type: "search", placeholder: "test id, prompt or answer contains", value: params.q || "", size: 32 });
  search.addEventListener("change", (e) => set({ q: e.target.value, offset: 0 }));
  const head = el("tr", {}, COLUMNS.map(([key, label, cls]) => {
    const mark = params.sort === key ? (params.desc === "1" ? " ▼" : " ▲") : "";
    return el("th", { class: cls || "", "data-sort": key, onclick: () => set({ sort: key, desc: params.sort === key && params.desc !== "1" ? "1" : "" }) }, label + mark);
  }));
  const body = page.rows.map((r) => [
    el("tr", { class: "result" },
      el("td", {}, r.run), el("td", {}, r.model), el("td", {}, r.suite), el("td", {}, link("result", resultKey(r), r.test)),
      el("td", { class: "num" }, r.epoch), el("td", {}, verdict(r.passed, r.status)), el("td", {}, r.failure_type || ""),
      el("td", { class: "num" }, r.score === null ? "" : r.score.toFixed(2)), el("td", { class: "num" }, ms(r.ttft_us)),
      el("td", { class: "num" }, ms(r.e2el_us)), el("td", { class: "num" }, r.tokens ?? ""), el("td", { class: "num" }, r.retries),
      el("td", { class: "flags" }, r.flags.join(", ")),
      el("td", { class: "num" }, r.task_s === null ? "" : r.task_s.toFixed(2)), el("td", {}, r.calls ?? "")),
    page.snippets && page.snippets[r.n] ? el("tr", { class: "snippet" }, el("td", { colspan: COLUMNS.length }, el("span", { class: "where" }, "matched: "), page.snippets[r.n])) : null,
  ]);
  const offset = page.offset, last = Math.min(offset + page.limit, page.total);
  const csv = "api/results.csv?" + new URLSearchParams(Object.fromEntries(Object.entries(params).filter(([k]) => !["offset", "limit"].includes(k))));
  const searching = page.search;
  show(
    el("h2", {}, "Results"),
    ...warningsView(warnings),
    el("div", { class: "filters" }, select("run", f.run), select("model", f.model), select("suite", f.suite),
      choose("passed", VERDICTS), select("failure_type", f.failure_type), search,
      el("a", { href: csv, class: "csv", download: "results.csv" }, "CSV of this table")),
    searching ? searchState(searching) : null,
    el("div", { class: "pager" },
      el("span", { id: "count" }, `${page.total ? offset + 1 : 0}–${last} of ${page.total}`),
      el("button", { disabled: offset === 0 ? "" : null, onclick: () => set({ offset: Math.max(0, offset - page.limit) }) }, "previous"),
      el("button", { disabled: last >= page.total ? "" : null, onclick: () => set({ offset: offset + page.limit }) }, "next")),
    el("div", { class: "scroll" }, el("table", { id: "results" }, head, body)));
}

const CLAMP_LINES = 16;
// Text in a <pre>; past CLAMP_LINES lines it is shown folded, with a button that unfolds it in place.
function textView(text, cls) {
  const lines = text.split("\n").length;
  const pre = el("pre", { class: (cls || "") + (lines > CLAMP_LINES ? " clamped" : "") }, text);
  if (lines <= CLAMP_LINES) return pre;
  const more = el("button", { class: "unfold", onclick: () => {
    const folded = pre.classList.toggle("clamped");
    more.textContent = folded ? `show all ${lines} lines` : "fold";
  } }, `show all ${lines} lines`);
  return [pre, more];
}

// How far the text search went. While the server is still reading the cassettes' text, the view asks again each
// second (only while it is still the view shown), so the table fills in by itself.
function searchState(st) {
  if (st.complete) return el("p", { id: "search-state", class: "note" }, `prompts and answers of ${int(st.searched)} exchanges searched (${st.ms} ms)`);
  const shown = location.hash;
  setTimeout(() => { if (location.hash === shown) route(true); }, 1000);
  return el("p", { id: "search-state", class: "warn" }, `prompts and answers of ${int(st.searched)} of ${int(st.of)} exchanges searched so far: ${st.why}; the table fills in as it goes`);
}

function messageView(m, extra) {
  return el("div", { class: "turn " + m.role + (extra ? " " + extra : "") },
    el("div", { class: "role" }, m.role + (m.name ? ` (${m.name})` : "")),
    m.reasoning ? textView(m.reasoning, "reasoning") : null,
    m.text ? textView(m.text) : null,
    m.tool_calls.map((c) => el("div", { class: "call" }, el("div", {}, "call ", el("code", {}, c.name), c.id ? el("span", { class: "dim" }, " " + c.id) : null), textView(c.arguments))));
}

// The stream's marks in an SVG stretched to the width; its labels in HTML, so they are never stretched or cut.
// `scaleEnd`: one time scale for several timelines (the two sides of a comparison).
function timelineView(tl, scaleEnd) {
  if (!tl.total_events) return el("div", { class: "timeline empty", "data-token-events": 0 }, `no stream events; E2EL ${ms(tl.e2el_us) || "–"} ms`);
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  let end = Math.max(1, scaleEnd || 0, tl.e2el_us || 0);
  for (const e of tl.events) end = Math.max(end, e.t_us);
  const W = 1000, H = 40, x = (t) => W * (t / end);
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("preserveAspectRatio", "none");
  const add = (tag, attrs, title) => {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (title !== undefined) { const t = document.createElementNS(NS, "title"); t.textContent = title; node.append(t); }
    svg.append(node);
    return node;
  };
  let prev = null;
  for (const e of tl.events) {
    if (e.token && e.gap && prev !== null) add("rect", { class: "gap", x: x(prev), y: 2, width: Math.max(1, x(e.t_us) - x(prev)), height: 36 }, `gap ${ms(e.t_us - prev)} ms`);
    if (e.token) prev = e.t_us;
  }
  for (const e of tl.events) {
    add("line", { class: "ev" + (e.token ? " token" : " other"), x1: x(e.t_us), x2: x(e.t_us), y1: 6, y2: 34 }, `${ms(e.t_us)} ms: ${JSON.stringify(e.text)}`);
  }
  const labels = [];
  if (tl.ttft_us !== null) {
    add("line", { class: "ttft", x1: x(tl.ttft_us), x2: x(tl.ttft_us), y1: 0, y2: H }, `TTFT ${ms(tl.ttft_us)} ms`);
    const at = (100 * tl.ttft_us) / end;
    labels.push(el("span", { class: "ttft-label", style: at > 50 ? `right:${(100 - at).toFixed(2)}%` : `left:${at.toFixed(2)}%` }, `TTFT ${ms(tl.ttft_us)} ms`));
  }
  const sampled = tl.events.length < tl.total_events ? ` (${int(tl.events.length)} drawn)` : "";
  return el("div", { class: "timeline", "data-token-events": tl.token_events },
    el("div", { class: "tl-head" }, `${tl.token_events} token events of ${int(tl.total_events)}${sampled}; TTFT ${ms(tl.ttft_us)} ms, E2EL ${ms(tl.e2el_us)} ms`,
      tl.decode_tokens_per_s === null ? "" : `; decode ${tl.decode_tokens_per_s.toFixed(1)} tok/s`),
    svg,
    el("div", { class: "tl-labels" }, labels),
    el("div", { class: "tl-axis" }, el("span", {}, "0"), el("span", {}, `${ms(end)} ms`)));
}

function headersView(title, headers) {
  if (!headers.length) return null;
  return el("div", {}, el("h4", {}, title), el("table", { class: "headers" }, headers.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, v)))));
}

// Folded until opened: its parts are built then, so a long transcript carries no hidden tables.
function folded(cls, summary, build) {
  const box = el("details", { class: cls }, el("summary", {}, summary));
  box.addEventListener("toggle", () => { if (box.open && box.children.length === 1) box.append(...[build()].flat(Infinity).filter((c) => c)); });
  return box;
}

function requestView(r) {
  const tools = r.tools.length + r.tools_left_out;
  const summary = [`request: ${r.method} ${r.path} · ${bytes(r.body_bytes)} · settings`, tools ? ` · ${tools} tool${tools === 1 ? "" : "s"}` : "",
    r.response_format ? " · response format" : "", ` · ${r.headers.length} headers`].join("");
  return folded("request", summary, () => [
    el("h4", {}, "settings"), el("pre", { class: "settings" }, r.settings),
    tools ? el("div", { class: "tools" }, el("h4", {}, `tools (${tools})`),
      r.tools.map((t) => el("details", { class: "tool" }, el("summary", {}, el("code", {}, t.name), t.description ? " — " + t.description : ""), el("pre", {}, t.parameters))),
      r.tools_left_out ? el("p", {}, `${r.tools_left_out} more tools: the raw request has them`) : null) : null,
    r.response_format ? [el("h4", {}, "response format"), el("pre", {}, r.response_format)] : null,
    headersView("request headers (secrets redacted)", r.headers),
    headersView("response headers", r.response_headers)]);
}

function callFigures(x, currency) {
  const t = x.tokens;
  const parts = [];
  if (t.input !== null || t.output !== null) {
    parts.push(`in ${int(t.input)} tok` + (t.cached_input ? ` (${int(t.cached_input)} cached)` : ""));
    parts.push(`out ${int(t.output)} tok` + (t.output_source === "counted" ? " (counted)" : ""));
  }
  if (x.cost !== null) parts.push(`${x.cost.toFixed(6)} ${currency}`);
  const time = (name, us) => (us === null ? `${name} –` : `${name} ${ms(us)} ms`);
  parts.push(time("TTFT", x.timeline.ttft_us), time("E2EL", x.timeline.e2el_us), `${bytes(x.response_bytes)} response`);
  return parts.join(" · ");
}

const said = (m) => m.text || m.reasoning || m.tool_calls.length;

function callView(x, i, key, currency, scaleEnd) {
  const raw = (part) => el("a", { href: "api/raw?" + new URLSearchParams({ ...key, id: x.id, part }), target: "_blank", class: "raw " + part }, "raw " + part);
  const where = [x.turn !== null ? `turn ${x.turn}` : null, x.attempt !== null ? `attempt ${x.attempt}` : null].filter(Boolean).join(" · ");
  return el("section", { class: "exchange" + (x.final ? "" : " superseded"), id: "call-" + x.id },
    el("h3", {}, `model call ${i + 1}`, where ? ` · ${where}` : "", ` · ${x.endpoint} · ${x.model || "?"}`,
      x.served_model && x.served_model !== x.model ? ` (served ${x.served_model})` : "",
      ` · HTTP ${x.status ?? "none"} · ${x.outcome}`, x.final ? "" : " · retried"),
    el("div", { class: "figures" }, callFigures(x, currency), " · ", raw("response"), " ", raw("request")),
    x.findings.length ? el("div", { class: "findings" }, "findings: " + x.findings.join(", ")) : null,
    x.error ? el("div", { class: "error" }, x.error) : null,
    el("div", { class: "call-body" }, said(x.answer) ? messageView(x.answer, "answer") : el("div", { class: "turn assistant answer none" }, el("div", { class: "role" }, "no answer")),
      timelineView(x.timeline, scaleEnd)),
    requestView(x.request));
}

// The transcript: each message once, in order; each model call where it was made.
function transcriptView(d, key, scaleEnd) {
  return d.exchanges.map((x, i) => [
    x.rewritten ? el("details", { class: "rewritten" }, el("summary", {}, `this request did not extend the conversation above: its ${x.messages.length} messages`), x.messages.map((m) => messageView(m))) : x.messages.map((m) => messageView(m)),
    callView(x, i, key, d.currency, scaleEnd),
  ]);
}

function resultBody(d, key, scaleEnd) {
  const checks = d.checks.length ? el("table", { class: "checks" },
    el("tr", {}, ["evaluator", "arguments", "verdict", "score", "weight", "reason"].map((h) => el("th", {}, h))),
    d.checks.map((c) => el("tr", {}, el("td", {}, c.evaluator), el("td", {}, el("pre", {}, JSON.stringify(c.args))),
      el("td", {}, verdict(c.passed)), el("td", { class: "num" }, c.score ?? ""), el("td", { class: "num" }, c.weight ?? ""), el("td", {}, c.reason)))) : null;
  const sum = (f) => d.exchanges.reduce((a, x) => (f(x) === null ? a : (a || 0) + f(x)), null);
  const totals = { input: sum((x) => x.tokens.input), output: sum((x) => x.tokens.output), cost: sum((x) => x.cost) };
  return [
    d.notes.map((n) => el("p", { class: "note-what warn" }, n)),
    el("div", { class: "verdict-line" }, verdict(d.row.passed, d.row.status), d.row.failure_type ? ` ${d.row.failure_type}` : "",
      d.row.score !== null ? ` · score ${d.row.score}` : "", ` · retries ${d.row.retries}`,
      ` · ${d.exchanges.length} model call${d.exchanges.length === 1 ? "" : "s"}`,
      totals.input !== null || totals.output !== null ? ` · ${int(totals.input)} tokens in, ${int(totals.output)} out` : "",
      totals.cost !== null ? ` · ${totals.cost.toFixed(6)} ${d.currency}` : "",
      d.findings.length ? ` · findings: ${d.findings.join(", ")}` : ""),
    d.row.task_s === null ? null : el("div", { class: "task-time" }, `task: ${d.row.task_s.toFixed(2)} s, every turn included`),
    d.calls ? el("div", { class: "calls" }, `tool calls: ${d.calls.made} made, ${d.calls.reference} in the reference: ${d.calls.verdict}`,
      d.calls.missing.length ? ` · missing ${d.calls.missing.join(", ")}` : "",
      d.calls.extra.length ? ` · extra ${d.calls.extra.join(", ")}` : "") : null,
    checks ? [el("h3", {}, "Checks"), checks] : null,
    d.missing.length ? el("p", { class: "error" }, `not in the cassette: ${d.missing.join(", ")}`) : null,
    el("h3", {}, "Transcript"),
    el("div", { class: "transcript" }, transcriptView(d, key, scaleEnd)),
  ];
}

async function showResult(params) {
  const key = { run: params.run, model: params.model, test: params.test, epoch: params.epoch };
  const d = await api("result", key);
  show(
    el("h2", {}, `${d.row.test} · ${d.row.model} · epoch ${d.row.epoch}`),
    el("div", {}, link("results", { run: d.row.run, model: d.row.model }, "← results of this run and model"), ` · run ${d.row.run || "(none: scored by rules)"}`),
    resultBody(d, key));
}

async function showCompare(params) {
  const { runs } = await facets();
  const sides = runs.flatMap((r) => r.models.map((m) => `${r.id}|${m.model}`));
  const pick = (name, value) =>
    el("select", { name, onchange: (e) => {
      const [run, model] = e.target.value.split("|");
      location.hash = "#/compare?" + new URLSearchParams({ ...params, [name + "_run"]: run, [name + "_model"]: model });
    } }, el("option", { value: "" }, `side ${name}`),
      sides.map((s) => { const o = el("option", { value: s }, s.replace("|", " · ")); if (s === value) o.selected = true; return o; }));
  const form = el("div", { class: "filters" }, pick("a", `${params.a_run}|${params.a_model}`), " vs ", pick("b", `${params.b_run}|${params.b_model}`));
  // A run id may be empty (traffic scored by rules): a side is chosen once its keys are there.
  if (!("a_run" in params) || !("b_run" in params)) {
    show(el("h2", {}, "Compare"), form, el("p", {}, "Choose two sides (a run and a model each)."));
    return;
  }
  const sidesKey = { a_run: params.a_run, a_model: params.a_model, b_run: params.b_run, b_model: params.b_model };
  const c = await api("compare", sidesKey);
  const rows = c.pairs.map((p) =>
    el("tr", { class: "pair" + (p.flip ? " flip-" + p.flip : "") },
      el("td", {}, p.flip || ""), el("td", {}, p.test), el("td", { class: "num" }, p.epoch),
      el("td", {}, link("result", resultKey(p.a), verdict(p.a.passed, p.a.status))), el("td", {}, p.a.failure_type || ""),
      el("td", {}, link("result", resultKey(p.b), verdict(p.b.passed, p.b.status))), el("td", {}, p.b.failure_type || ""),
      el("td", {}, link("pair", { ...sidesKey, test: p.test, epoch: p.epoch }, "side by side"))));
  show(
    el("h2", {}, "Compare"), form,
    el("p", { id: "flips" }, `${c.regressed} regressed, ${c.improved} improved of ${c.pairs.length} shared tests` +
      (c.only_a || c.only_b ? ` (${c.only_a} only in a, ${c.only_b} only in b)` : "")),
    el("div", { class: "scroll" }, el("table", { id: "compare" },
      el("tr", {}, ["flip", "test", "epoch", "a", "a failure", "b", "b failure", ""].map((h) => el("th", {}, h))), rows)));
}

// Both sides of one test and epoch: the word-level difference of their final answers, then both results with their
// timelines on one time scale.
async function showPair(params) {
  const p = await api("pair", params);
  let end = 1;
  for (const d of [p.a, p.b]) for (const x of d.exchanges) {
    end = Math.max(end, x.timeline.e2el_us || 0);
    for (const e of x.timeline.events) end = Math.max(end, e.t_us);
  }
  const key = (d) => resultKey(d.row);
  const diff = el("div", { class: "diff" }, p.diff.map((piece) =>
    piece.op === "same" ? piece.text : el(piece.op === "gone" ? "del" : "ins", {}, piece.text)));
  show(
    el("h2", {}, `${p.a.row.test} · epoch ${p.a.row.epoch}` + (p.flip ? ` · ${p.flip}` : "")),
    el("div", {}, link("compare", { a_run: params.a_run, a_model: params.a_model, b_run: params.b_run, b_model: params.b_model }, "← the comparison"),
      " · timelines share one time scale: " + ms(end) + " ms"),
    el("h3", {}, "Final answers, word by word (", el("del", {}, "a only"), ", ", el("ins", {}, "b only"), ")"),
    p.diff_note ? el("p", { class: "note" }, p.diff_note) : null,
    diff,
    el("div", { class: "cols" },
      [p.a, p.b].map((d, i) => el("div", { class: "side" },
        el("h3", {}, `${i ? "b" : "a"}: `, link("result", key(d), `${d.row.run || "(no run id)"} · ${d.row.model}`)), resultBody(d, key(d), end)))));
}

// Live: the exchanges of the followed folder's cassettes as they are recorded (bench view --follow DIR), newest
// first, from the server's events; the figures above them change as they come. The page keeps LIVE_ROWS rows.
const LIVE_ROWS = 500;
const FLOW_COLUMNS = ["time", "cassette", "id", "request", "model", "test", "status", "outcome", "TTFT ms", "E2EL ms", "tokens in/out", "error"];

function flowRow(f) {
  const time = new Date(f.started_us / 1000).toISOString().slice(11, 23);
  return el("tr", { class: "flow fresh" + (f.failed ? " bad" : ""), "data-seq": f.seq, "data-id": f.id, "data-test": f.test || "", "data-shown": Date.now() },
    el("td", { class: "num" }, time), el("td", {}, f.cassette),
    el("td", {}, link("flow", { cassette: f.cassette, id: f.id }, f.id)),
    el("td", {}, `${f.method} ${f.path}`), el("td", {}, f.model || ""), el("td", {}, f.test || ""),
    el("td", { class: "num" }, f.status ?? "none"), el("td", {}, f.outcome + (f.replayed ? " (replayed)" : "")),
    el("td", { class: "num" }, ms(f.ttft_us)), el("td", { class: "num" }, ms(f.e2el_us)),
    el("td", { class: "num" }, `${f.input_tokens ?? "?"}/${f.output_tokens ?? "?"}`),
    el("td", { class: "error" }, f.error || ""));
}

function statsView(s) {
  const box = (label, value) => el("div", {}, el("b", {}, value), label);
  const num = (x, d) => (x === null ? "–" : x.toFixed(d));
  return [
    box("exchanges", int(s.flows)), box("failed", int(s.failed)), box("req/s (last 10 s)", num(s.per_s, 1)),
    box("output tok/s", num(s.output_tokens_per_s, 0)), box("TTFT p50 ms (last 100)", num(s.ttft_p50_ms, 1)),
    box("E2EL p50 ms", num(s.e2el_p50_ms, 1)), box("cassettes (recording)", `${s.cassettes} (${s.recording})`),
  ];
}

async function showLive() {
  const { live } = await facets();
  if (!live) {
    show(el("h2", {}, "Live"), el("p", {}, "Not following a folder: start bench view with --follow DIR (the folder a bench proxy or bench record writes its cassettes to)."));
    return;
  }
  const stats = el("div", { class: "stats", id: "live-stats" }, "waiting for the first read…");
  const body = el("tbody", {});
  const problems = el("div", {});
  const onlyFailed = el("input", { type: "checkbox", id: "only-failed", onchange: () => body.classList.toggle("only-failed", onlyFailed.checked) });
  show(el("h2", {}, "Live"), el("p", {}, "Following ", el("code", {}, live), ": each exchange as it is recorded (read-only)."),
    stats, problems,
    el("div", { class: "filters" }, el("label", {}, onlyFailed, " failed only")),
    el("div", { class: "scroll" }, el("table", { id: "flows" }, el("thead", {}, el("tr", {}, FLOW_COLUMNS.map((h) => el("th", {}, h)))), body)));
  liveSource = new EventSource("api/live/events?after=0");
  liveSource.addEventListener("flows", (e) => {
    const { flows, stats: s } = JSON.parse(e.data);
    stats.replaceChildren(...statsView(s));
    problems.replaceChildren(...s.problems.map((p) => el("p", { class: "warn" }, p)));
    for (const f of flows) body.prepend(flowRow(f));
    while (body.children.length > LIVE_ROWS) body.lastChild.remove();
  });
}

// One live exchange: its request's messages, the call, its timeline and raw bytes (re-read from its cassette).
async function showFlow(params) {
  const key = { cassette: params.cassette, id: params.id };
  const x = await api("flow", key);
  const raw = (part) => el("a", { href: "api/flow?" + new URLSearchParams({ ...key, part }), target: "_blank", class: "raw " + part }, "raw " + part);
  const call = callView(x, 0, {}, null);
  call.querySelector(".figures").replaceChildren(callFigures(x, ""), " · ", raw("response"), " ", raw("request"));
  show(el("h2", {}, `${params.id} · ${params.cassette}`), el("div", {}, link("live", {}, "← live")),
    el("div", { class: "transcript" }, x.messages.map((m) => messageView(m)), call));
}

// A `bench load` run's levels (docs/load.md), as bench report counts them; each chart is an SVG image the server
// draws (an <img>: nothing in it runs).
const LOAD_COLUMNS = ["level", "load", "requests", "failed", "sent/s", "req/s", "out tok/s", "TTFT p50", "TTFT p99",
  "ITL p50", "E2EL p50", "E2EL p99", "goodput/s", "SLO attained", "pass rate", "send late p99"];

async function showLoad() {
  const { sources } = await api("load");
  const num = (x, d) => (x === null || x === undefined ? "–" : x.toFixed(d));
  const share = (x) => (x === null || x === undefined ? "–" : pct(x));
  const left = (r) => (r.warmup || r.cooldown ? ` (+${r.warmup} warm-up, ${r.cooldown} cool-down)` : "");
  const row = (r) => el("tr", {},
    el("td", { class: "num" }, r.level), el("td", {}, r.load), el("td", { class: "num" }, r.requests + left(r)),
    [r.failed].map((v) => el("td", { class: "num" }, v)),
    [r.sent_per_s, r.request_throughput].map((v) => el("td", { class: "num" }, num(v, 2))),
    el("td", { class: "num" }, num(r.output_throughput, 1)),
    [r.ttft_p50_ms, r.ttft_p99_ms, r.itl_p50_ms, r.e2el_p50_ms, r.e2el_p99_ms].map((v) => el("td", { class: "num" }, num(v, 1))),
    el("td", { class: "num" }, num(r.goodput, 2)),
    [r.slo_attainment, r.pass_rate].map((v) => el("td", { class: "num" }, share(v))),
    el("td", { class: "num" }, num(r.late_p99_ms, 2)));
  const section = (s) => el("section", { class: "load" },
    el("h3", {}, s.name),
    el("p", {}, `SLO ${s.slo}.` + (s.saturation ? ` Saturation: ${s.saturation}.` : "")),
    el("div", { class: "scroll" }, el("table", { class: "levels" }, el("tr", {}, LOAD_COLUMNS.map((h) => el("th", {}, h))), s.rows.map(row))),
    el("div", { class: "charts" }, s.charts.map((c) => el("img", {
      class: "load-chart", alt: `${c} against ${s.x_label}`,
      src: "api/load_chart?" + new URLSearchParams({ source: s.source, chart: c }) }))));
  show(el("h2", {}, "Load"),
    sources.length ? sources.map(section) : el("p", {}, "No bench load run in these scores (docs/load.md)."));
}

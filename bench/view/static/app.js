// bench view: a hash-routed single page over the JSON API (/api/...). Every view's state is in the URL's hash,
// so a copied URL opens the same view. No build step, no dependency.
"use strict";

const main = document.getElementById("main");
const COLUMNS = [
  ["model", "model"], ["suite", "suite"], ["test", "test"], ["epoch", "epoch", "num"], ["passed", "result"],
  ["failure_type", "failure"], ["score", "score", "num"], ["ttft_us", "TTFT ms", "num"],
  ["e2el_us", "E2EL ms", "num"], ["tokens", "tokens", "num"], ["retries", "retries", "num"], ["flags", "notes"],
  ["task_s", "task s", "num"], ["calls", "calls vs reference"],
];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
  return node;
}

async function api(path, params) {
  const url = "api/" + path + (params ? "?" + new URLSearchParams(params) : "");
  const response = await fetch(url);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

const ms = (us) => (us === null || us === undefined ? "" : (us / 1000).toFixed(1));
const verdict = (p) => (p === true ? el("span", { class: "pass" }, "pass") : p === false ? el("span", { class: "fail" }, "fail") : "–");
const pct = (x) => (100 * x).toFixed(1) + "%";
const link = (view, params, text) => el("a", { href: "#/" + view + "?" + new URLSearchParams(params) }, text);
const resultKey = (r) => ({ run: r.run, model: r.model, test: r.test, epoch: r.epoch });

function route() {
  const hash = location.hash.slice(2) || "runs";
  const [view, query] = hash.split("?");
  const params = Object.fromEntries(new URLSearchParams(query || ""));
  const views = { runs: showRuns, results: showResults, result: showResult, compare: showCompare, load: showLoad };
  main.replaceChildren("loading…");
  (views[view] || showRuns)(params)
    .catch((err) => main.replaceChildren(el("p", { class: "error" }, err.message)))
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
  const { runs, warnings } = await facets();
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
  main.replaceChildren(
    el("h2", {}, "Runs"),
    ...warningsView(warnings),
    el("table", { id: "runs" },
      el("tr", {}, ["run", "model", "passed", "pass rate", "95% Wilson", "settings", "fingerprints", "catalog", "source"].map((h) => el("th", {}, h))),
      rows));
}

async function showResults(params) {
  const { facets: f, warnings } = await facets();
  const page = await api("results", params);
  const set = (changes) => {
    const next = { ...params, ...changes };
    for (const k of Object.keys(next)) if (next[k] === "" || next[k] === undefined) delete next[k];
    location.hash = "#/results?" + new URLSearchParams(next);
  };
  const select = (name, values) =>
    el("select", { name, onchange: (e) => set({ [name]: e.target.value, offset: 0 }) },
      el("option", { value: "" }, `any ${name}`),
      values.map((v) => { const o = el("option", { value: v }, v); if (params[name] === v) o.selected = true; return o; }));
  const search = el("input", { name: "q", placeholder: "test id contains", value: params.q || "" });
  search.addEventListener("change", (e) => set({ q: e.target.value, offset: 0 }));
  const head = el("tr", {}, COLUMNS.map(([key, label, cls]) => {
    const mark = params.sort === key ? (params.desc === "1" ? " ▼" : " ▲") : "";
    return el("th", { class: cls || "", "data-sort": key, onclick: () => set({ sort: key, desc: params.sort === key && params.desc !== "1" ? "1" : "" }) }, label + mark);
  }));
  const body = page.rows.map((r) =>
    el("tr", { class: "result" },
      el("td", {}, r.model), el("td", {}, r.suite), el("td", {}, link("result", resultKey(r), r.test)),
      el("td", { class: "num" }, r.epoch), el("td", {}, verdict(r.passed)), el("td", {}, r.failure_type || ""),
      el("td", { class: "num" }, r.score === null ? "" : r.score.toFixed(2)), el("td", { class: "num" }, ms(r.ttft_us)),
      el("td", { class: "num" }, ms(r.e2el_us)), el("td", { class: "num" }, r.tokens ?? ""), el("td", { class: "num" }, r.retries),
      el("td", { class: "flags" }, r.flags.join(", ")),
      el("td", { class: "num" }, r.task_s === null ? "" : r.task_s.toFixed(2)), el("td", {}, r.calls ?? "")));
  const offset = page.offset, last = Math.min(offset + page.limit, page.total);
  main.replaceChildren(
    el("h2", {}, "Results"),
    ...warningsView(warnings),
    el("div", { class: "filters" }, select("run", f.run), select("model", f.model), select("suite", f.suite),
      el("select", { name: "passed", onchange: (e) => set({ passed: e.target.value, offset: 0 }) },
        ["", "pass", "fail"].map((v) => { const o = el("option", { value: v }, v || "pass or fail"); if ((params.passed || "") === v) o.selected = true; return o; })),
      select("failure_type", f.failure_type), search),
    el("div", { class: "pager" },
      el("span", { id: "count" }, `${page.total ? offset + 1 : 0}–${last} of ${page.total}`),
      el("button", { disabled: offset === 0 ? "" : null, onclick: () => set({ offset: Math.max(0, offset - page.limit) }) }, "previous"),
      el("button", { disabled: last >= page.total ? "" : null, onclick: () => set({ offset: offset + page.limit }) }, "next")),
    el("table", { id: "results" }, head, body));
}

function turnView(t) {
  return el("div", { class: "turn " + t.role },
    el("div", { class: "role" }, t.role + (t.name ? ` (${t.name})` : "")),
    t.reasoning ? el("pre", { class: "reasoning" }, t.reasoning) : null,
    t.text ? el("pre", {}, t.text) : null,
    t.tool_calls.map((c) => el("div", { class: "call" }, el("div", {}, "call ", el("code", {}, c.name)), el("pre", {}, c.arguments))));
}

function timelineView(tl) {
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  const end = Math.max(1, tl.e2el_us || 0, ...tl.events.map((e) => e.t_us));
  const W = 1000, H = 90, x = (t) => 10 + (W - 20) * (t / end);
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
    if (e.token && e.gap && prev !== null) add("rect", { class: "gap", x: x(prev), y: 10, width: Math.max(1, x(e.t_us) - x(prev)), height: 60 }, `gap ${ms(e.t_us - prev)} ms`);
    if (e.token) prev = e.t_us;
  }
  for (const e of tl.events) {
    add("line", { class: "ev" + (e.token ? " token" : " other"), x1: x(e.t_us), x2: x(e.t_us), y1: 20, y2: 60 }, `${ms(e.t_us)} ms: ${JSON.stringify(e.text)}`);
  }
  if (tl.ttft_us !== null) {
    add("line", { class: "ttft", x1: x(tl.ttft_us), x2: x(tl.ttft_us), y1: 5, y2: 75 }, `TTFT ${ms(tl.ttft_us)} ms`);
    add("text", { x: x(tl.ttft_us) + 3, y: 86, "font-size": 11 }, undefined).textContent = `TTFT ${ms(tl.ttft_us)} ms`;
  }
  add("text", { x: W - 10, y: 86, "font-size": 11, "text-anchor": "end" }).textContent = `${ms(end)} ms`;
  return el("div", { class: "timeline", "data-token-events": tl.token_events },
    el("div", {}, `${tl.token_events} token events of ${tl.events.length}; TTFT ${ms(tl.ttft_us)} ms, E2EL ${ms(tl.e2el_us)} ms`,
      tl.decode_tokens_per_s === null ? "" : `; decode ${tl.decode_tokens_per_s.toFixed(1)} tok/s`), svg);
}

function resultBody(d, key) {
  const checks = el("table", { class: "checks" },
    el("tr", {}, ["evaluator", "arguments", "verdict", "score", "weight", "reason"].map((h) => el("th", {}, h))),
    d.checks.map((c) => el("tr", {}, el("td", {}, c.evaluator), el("td", {}, el("pre", {}, JSON.stringify(c.args))),
      el("td", {}, verdict(c.passed)), el("td", { class: "num" }, c.score ?? ""), el("td", { class: "num" }, c.weight ?? ""), el("td", {}, c.reason))));
  const exchanges = d.exchanges.map((x) =>
    el("section", { class: "exchange" },
      el("h3", {}, `exchange ${x.id}`, x.turn !== null ? ` · turn ${x.turn}` : "", x.attempt !== null ? ` · attempt ${x.attempt}` : "",
        ` · ${x.endpoint} · status ${x.status ?? "none"} · ${x.outcome} `,
        el("a", { href: "api/raw?" + new URLSearchParams({ ...key, id: x.id }), target: "_blank", class: "raw" }, "raw SSE")),
      x.findings.length ? el("div", {}, "findings: " + x.findings.join(", ")) : null,
      x.error ? el("div", { class: "error" }, x.error) : null,
      timelineView(x.timeline),
      el("div", { class: "conversation" }, x.conversation.map(turnView))));
  return [
    el("div", {}, verdict(d.row.passed), ` ${d.row.failure_type || ""} · score ${d.row.score ?? ""} · retries ${d.row.retries}`,
      d.findings.length ? ` · findings: ${d.findings.join(", ")}` : ""),
    d.row.task_s === null ? null : el("div", { class: "task-time" }, `task: ${d.row.task_s.toFixed(2)} s, every turn included`),
    d.calls ? el("div", { class: "calls" }, `tool calls: ${d.calls.made} made, ${d.calls.reference} in the reference: ${d.calls.verdict}`,
      d.calls.missing.length ? ` · missing ${d.calls.missing.join(", ")}` : "",
      d.calls.extra.length ? ` · extra ${d.calls.extra.join(", ")}` : "") : null,
    el("h3", {}, "Checks"), checks,
    d.missing.length ? el("p", { class: "error" }, `not in the cassette: ${d.missing.join(", ")}`) : null,
    exchanges,
  ];
}

async function showResult(params) {
  const key = { run: params.run, model: params.model, test: params.test, epoch: params.epoch };
  const d = await api("result", key);
  main.replaceChildren(
    el("h2", {}, `${d.row.test} · ${d.row.model} · epoch ${d.row.epoch}`),
    el("div", {}, link("results", { run: d.row.run, model: d.row.model }, "← results of this run and model"), ` · run ${d.row.run}`),
    ...resultBody(d, key).flat(Infinity).filter((c) => c !== null));
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
    main.replaceChildren(el("h2", {}, "Compare"), form, el("p", {}, "Choose two sides (a run and a model each)."));
    return;
  }
  const c = await api("compare", { a_run: params.a_run, a_model: params.a_model, b_run: params.b_run, b_model: params.b_model });
  const rows = c.pairs.map((p) =>
    el("tr", { class: "pair" + (p.flip ? " flip-" + p.flip : "") },
      el("td", {}, p.flip || ""), el("td", {}, p.test), el("td", { class: "num" }, p.epoch),
      el("td", {}, link("result", resultKey(p.a), verdict(p.a.passed))), el("td", {}, p.a.failure_type || ""),
      el("td", {}, link("result", resultKey(p.b), verdict(p.b.passed))), el("td", {}, p.b.failure_type || ""),
      el("td", {}, p.flip ? el("button", { onclick: () => showPair(p) }, "side by side") : null)));
  main.replaceChildren(
    el("h2", {}, "Compare"), form,
    el("p", { id: "flips" }, `${c.regressed} regressed, ${c.improved} improved of ${c.pairs.length} shared tests` +
      (c.only_a || c.only_b ? ` (${c.only_a} only in a, ${c.only_b} only in b)` : "")),
    el("div", { id: "pair" }),
    el("table", { id: "compare" },
      el("tr", {}, ["flip", "test", "epoch", "a", "a failure", "b", "b failure", ""].map((h) => el("th", {}, h))), rows));
}

async function showPair(p) {
  const [a, b] = await Promise.all([api("result", resultKey(p.a)), api("result", resultKey(p.b))]);
  document.getElementById("pair").replaceChildren(
    el("h3", {}, `${p.test} · epoch ${p.epoch}`),
    el("div", { class: "cols" },
      el("div", { class: "side" }, el("h3", {}, `${p.a.run} · ${p.a.model}`), resultBody(a, resultKey(p.a))),
      el("div", { class: "side" }, el("h3", {}, `${p.b.run} · ${p.b.model}`), resultBody(b, resultKey(p.b)))));
  document.getElementById("pair").scrollIntoView();
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
    el("table", { class: "levels" }, el("tr", {}, LOAD_COLUMNS.map((h) => el("th", {}, h))), s.rows.map(row)),
    el("div", { class: "charts" }, s.charts.map((c) => el("img", {
      class: "load-chart", alt: `${c} against ${s.x_label}`,
      src: "api/load_chart?" + new URLSearchParams({ source: s.source, chart: c }) }))));
  main.replaceChildren(el("h2", {}, "Load"),
    ...(sources.length ? sources.map(section) : [el("p", {}, "No bench load run in these scores (docs/load.md).")]));
}

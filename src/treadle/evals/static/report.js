// An eval report: its summary, a table of cases (a column group per model, marks against the
// baseline), and per case its evaluators, samples, conversation and the run inspector of the
// web UI (inspector.js, loaded first) over the sample's recorded events. The data is the
// JSON in #report-data; every text reaches the page as a text node, never as HTML.
"use strict";

const R = JSON.parse(document.getElementById("report-data").textContent);
const byId = (id) => document.getElementById(id);
const MARKS = { regressed: "▼", improved: "▲", new: "new", missing: "gone", same: "=" };
const num = (v, d = 2) => (v === null || v === undefined ? "–" : Number(v).toFixed(d));
const pct = (v) => (v === null || v === undefined ? "–" : `${Math.round(v * 100)}%`);
const money = (v) => (v === null || v === undefined ? "?" : `$${Number(v).toFixed(4)}`);
const secs = (v) => (v < 1 ? `${Math.round(v * 1000)} ms` : `${v.toFixed(2)} s`);
const passed = (c) => `${c.samples.filter((s) => s.passed).length}/${c.samples.length}`;
const caseOf = (name, model) => R.cases.find((c) => c.case === name && c.model === model);
const changeOf = (name, model) => R.comparison?.cases.find((c) => c.case === name && c.model === model);
const text = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));

let inspector = null;

function cell(tag, value, attrs = {}) { return el(tag, { ...attrs, text: value }); }

function facts(pairs) {
  const dl = el("dl", { class: "facts-list" });
  for (const [k, v] of pairs) dl.append(el("dt", { text: k }), el("dd", { text: v }));
  return dl;
}

function changeMark(change) {
  if (!change) return el("span");
  const delta = change.before !== null && change.after !== null ? ` ${change.after - change.before >= 0 ? "+" : ""}${(change.after - change.before).toFixed(2)}` : "";
  return el("span", { class: `change ${change.status}`, "data-testid": "change", "data-status": change.status, text: `${MARKS[change.status] || ""}${change.status === "same" ? "" : delta}`, title: change.status });
}

// ---------- summary ----------

function renderSummary() {
  byId("title").textContent = R.name;
  document.title = `${R.name} · treadle eval`;
  const head = [
    ["started", R.started_at ? new Date(R.started_at).toLocaleString() : "–"],
    ["took", secs(R.duration_s)],
    ["models", R.models.join(", ")],
    ["repeats", String(R.repeat)],
  ];
  const box = byId("summary");
  box.replaceChildren(facts(head));
  if (R.cancelled) box.append(el("p", { class: "banner", "data-testid": "cancelled", text: `Cancelled: ${R.unfinished.length} sample(s) did not finish; what finished is below.` }));
  const ks = [...new Set(R.summaries.flatMap((s) => Object.keys(s.pass_at)))].sort((a, b) => a - b);
  const table = el("table", { class: "grid", "data-testid": "summary-table" });
  const head2 = el("tr", {}, cell("th", "model"), cell("th", "score"), cell("th", "passed"), ...ks.map((k) => cell("th", `pass@${k}`)), cell("th", "cost"), cell("th", "judges"), cell("th", "tokens"), cell("th", "errors"));
  if (R.comparison) head2.append(cell("th", "vs baseline"));
  table.append(el("thead", {}, head2));
  const body = el("tbody");
  for (const s of R.summaries) {
    const row = el("tr", { "data-testid": "summary-row", "data-model": s.model }, cell("td", s.model), cell("td", num(s.score), { "data-testid": "model-score" }), cell("td", pct(s.pass_rate)), ...ks.map((k) => cell("td", num(s.pass_at[k]))), cell("td", money(s.cost_usd)), cell("td", money(s.eval_cost_usd)), cell("td", String(s.tokens)), cell("td", String(s.errors)));
    if (R.comparison) {
      const m = R.comparison.models.find((x) => x.model === s.model);
      const td = el("td", { "data-testid": "model-change", "data-status": m ? m.status : "" });
      if (m) td.append(changeMark(m), document.createTextNode(` ${num(m.before)} → ${num(m.after)} · ${m.regressed_cases} ▼ ${m.improved_cases} ▲`));
      row.append(td);
    }
    body.append(row);
  }
  table.append(body);
  box.append(table);
}

// ---------- cases ----------

function renderCases() {
  const names = [...new Set(R.cases.map((c) => c.case))];
  const table = el("table", { class: "grid cases", "data-testid": "cases" });
  const head = el("tr", {}, cell("th", "case"));
  for (const m of R.models) head.append(el("th", { colspan: "2", text: m }));
  table.append(el("thead", {}, head));
  const body = el("tbody");
  for (const name of names) {
    const row = el("tr", { "data-testid": "case-row", "data-case": name }, cell("td", name, { class: "name" }));
    for (const model of R.models) {
      const c = caseOf(name, model);
      if (!c) { row.append(cell("td", "–"), cell("td", "")); continue; }
      const button = el("button", { type: "button", class: `score ${c.pass_rate === 1 ? "ok" : c.pass_rate === 0 ? "bad" : "mixed"}`, "data-testid": "case-score", "data-model": model, "data-score": String(c.score), text: `${num(c.score)}${c.samples.length > 1 ? ` ±${num(c.spread)}` : ""} · ${passed(c)}` });
      button.addEventListener("click", () => openCase(name, model));
      row.append(el("td", {}, button), el("td", {}, changeMark(changeOf(name, model))));
    }
    body.append(row);
  }
  table.append(body);
  byId("cases").replaceChildren(el("h2", { text: `Cases (${names.length})` }), table);
}

// ---------- one case ----------

function openCase(name, model, sample = 0) {
  const c = caseOf(name, model);
  if (!c) return;
  history.replaceState(null, "", `#case=${encodeURIComponent(name)}&model=${encodeURIComponent(model)}&sample=${sample}`);
  const box = byId("detail");
  box.hidden = false;
  box.dataset.case = name;
  box.dataset.model = model;
  const ks = Object.keys(c.pass_at);
  box.replaceChildren(
    el("h2", { text: `${c.case} · ${c.model}` }),
    facts([
      ["input", c.input.length > 1 ? c.input.map((t, i) => `(${i + 1}) ${t}`).join("\n") : c.input[0] || ""],
      ...(c.expected_output !== null ? [["expected", text(c.expected_output)]] : []),
      ["score", `${num(c.score)} ± ${num(c.spread)} over ${c.samples.length} sample(s)`],
      ["passed", `${passed(c)}${ks.length ? ` · ${ks.map((k) => `pass@${k} ${num(c.pass_at[k])}`).join(" · ")}` : ""}`],
      ["cost", `${money(c.cost_usd)} · judges ${money(c.eval_cost_usd)} · ${c.tokens} tokens`],
      ...(c.tags.length ? [["tags", c.tags.join(", ")]] : []),
      ...(Object.keys(c.metadata).length ? [["metadata", JSON.stringify(c.metadata)]] : []),
    ]),
  );
  const evs = el("table", { class: "grid", "data-testid": "evaluators" }, el("thead", {}, el("tr", {}, cell("th", "evaluator"), cell("th", "mean"), cell("th", "spread"), cell("th", "passed"))));
  const evBody = el("tbody");
  for (const [n, st] of Object.entries(c.evaluators)) evBody.append(el("tr", {}, cell("td", n), cell("td", num(st.mean)), cell("td", num(st.spread)), cell("td", pct(st.pass_rate))));
  evs.append(evBody);
  const picker = el("div", { class: "samples", "data-testid": "samples" });
  c.samples.forEach((s, i) => {
    const b = el("button", { type: "button", class: `sample ${s.error ? "bad" : s.passed ? "ok" : "bad"}`, "data-testid": "sample", "data-passed": String(s.passed), text: `#${s.repeat + 1} ${s.error ? "error" : s.passed ? "pass" : "fail"} ${num(s.score)}` });
    b.addEventListener("click", () => openCase(name, model, i));
    if (i === sample) b.classList.add("selected");
    picker.append(b);
  });
  box.append(el("h3", { text: "Evaluators" }), evs, el("h3", { text: "Samples" }), picker, sampleView(c.samples[sample] || c.samples[0]));
  box.scrollIntoView({ block: "start" });
}

function sampleView(s) {
  const view = el("div", { class: "sample-view", "data-testid": "sample-view" });
  view.append(facts([
    ["result", `${s.error ? `error: ${s.error}` : s.passed ? "passed" : "failed"} · score ${num(s.score)} · ended ${s.reason ?? "–"}`],
    ["spent", `${secs(s.duration_s)} · ${s.turns} turn(s) · ${s.tool_calls.length} tool call(s) · ${s.usage.total_tokens} tokens · ${money(s.usage.cost_usd)}${s.eval_usage.total_tokens ? ` · judges ${s.eval_usage.total_tokens} tokens ${money(s.eval_usage.cost_usd)}` : ""}`],
  ]));
  const scores = el("table", { class: "grid", "data-testid": "scores" }, el("thead", {}, el("tr", {}, cell("th", "evaluator"), cell("th", "score"), cell("th", ""), cell("th", "reason"))));
  const body = el("tbody");
  for (const sc of s.scores) {
    const reason = el("td", { class: "reason" }, el("div", { text: sc.reason }));
    if (sc.details?.thinking) reason.append(el("details", {}, el("summary", { text: "the judge's thinking" }), el("pre", { class: "raw", text: sc.details.thinking })));
    if (sc.details?.model) reason.append(el("div", { class: "muted", text: `judged by ${sc.details.model}${sc.usage ? ` · ${sc.usage.total_tokens} tokens · ${money(sc.usage.cost_usd)}` : ""}` }));
    body.append(el("tr", { "data-testid": "score-row", "data-name": sc.name, "data-passed": String(sc.passed) }, cell("td", sc.name), cell("td", num(sc.value)), cell("td", sc.error ? "error" : sc.passed ? "✓" : "✗", { class: sc.passed ? "ok" : "bad" }), reason));
  }
  scores.append(body);
  view.append(el("h3", { text: "Scores" }), scores, el("h3", { text: "Conversation" }), conversation(s.transcript));
  view.append(el("h3", { text: "Run inspector" }), inspectorPanes(s));
  return view;
}

function conversation(transcript) {
  const box = el("div", { class: "transcript", "data-testid": "transcript" });
  for (const m of transcript) {
    const row = el("div", { class: `turn ${m.role}`, "data-role": m.role });
    if (m.role === "tool") row.append(el("div", { class: "who", text: `${m.name}${m.is_error ? " · error" : ""}` }), el("pre", { text: m.text }));
    else {
      row.append(el("div", { class: "who", text: m.role === "user" ? "user" : "agent" }));
      if (m.thinking) row.append(el("details", {}, el("summary", { text: "thinking" }), el("pre", { text: m.thinking })));
      if (m.text) row.append(el("div", { class: "text", text: m.text }));
      for (const call of m.tool_calls || []) row.append(el("code", { class: "call", text: `→ ${call.name}(${JSON.stringify(call.arguments)})` }));
      if (m.error) row.append(el("div", { class: "error", text: m.error }));
    }
    box.append(row);
  }
  if (!transcript.length) box.append(el("p", { class: "muted", text: "No message (the sample did not get to run)." }));
  return box;
}

function inspectorPanes(s) {
  const timeline = el("div", { class: "timeline", "data-testid": "timeline" });
  const rawTitle = el("span", { class: "muted" });
  const viewRequest = el("button", { type: "button", class: "view-request", "data-testid": "view-request", "aria-pressed": "false", hidden: "" });
  const raw = el("pre", { class: "raw", "data-testid": "raw-events", text: "Click an item of the timeline to see its events." });
  const panes = el("div", { class: "inspector-panes" },
    el("div", { class: "pane" }, el("h4", { text: "Timeline" }), timeline),
    el("div", { class: "pane" }, el("h4", { class: "raw-head" }, "Events ", rawTitle, viewRequest), raw));
  inspector = makeInspector({ timeline, raw, rawTitle, viewRequest, empty: "No events were recorded for this sample." });
  // the sample's runs (one per user turn) split where the agent's own run starts
  let run = null;
  for (const ev of s.events) {
    if (ev.type === "agent_start" && !ev.depth) run = inspector.addRun(`run-${inspector.runs.size + 1}`);
    if (!run) run = inspector.addRun("run-1");
    inspector.add(run, ev);
  }
  for (const r of inspector.runs.values()) r.done = true;
  inspector.render();
  return panes;
}

// ---------- wiring ----------

function applyTheme(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}

function start() {
  byId("theme").addEventListener("click", () => {
    const dark = document.documentElement.dataset.theme ? document.documentElement.dataset.theme === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
    applyTheme(dark ? "light" : "dark");
  });
  renderSummary();
  renderCases();
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get("case")) openCase(hash.get("case"), hash.get("model") || R.models[0], Number(hash.get("sample") || 0));
  document.body.dataset.ready = "true";
}

start();

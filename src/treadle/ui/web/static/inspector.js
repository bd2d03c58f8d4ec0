// The run inspector: a timeline of a run's events (the run, its turns, each model request
// with its time to first token, tool calls, retries, compactions; a sub-agent indented under
// the tool call that runs it) and an events pane (the selected item's raw events, or the
// request its model call sent). Shared by the web app (live runs, over SSE) and the eval
// report (recorded runs, from `treadle eval --html`). Plain JS, no build step; text only
// ever reaches the page as text nodes.
"use strict";

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

function fmtMs(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "…";
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

// The custom event a model request is recorded as (the web app's RequestView hook, an eval
// sample's RequestRecorder): the inspector's "Request sent" view.
const REQUEST_EVENT = "treadle.ui.model_request";
const LIVE_TAIL = 100; // events of the newest run shown while nothing is selected

function newRun(id, n) {
  return { id, events: [], items: [], t0: null, end: null, done: false, n };
}

function item(run, kind, label, event, depth, extra = {}) {
  const it = { kind, label, start: event.timestamp, end: null, events: [event], depth, ...extra };
  run.items.push(it);
  return it;
}

function digest(run, ev) {
  run.t0 = run.t0 ?? ev.timestamp;
  run.last = Math.max(run.last || 0, ev.timestamp);
  const open = (run.open ||= {});
  const key = (k) => `${ev.loop_id}:${k}`;
  const depth = (ev.depth || 0) * 2; // a sub-agent sits under the tool call that runs it
  switch (ev.type) {
    case "agent_start":
      open[key("run")] = item(run, "run", depth ? `sub-agent · ${ev.config?.model || ""}` : `run ${run.n} · ${ev.config?.model || ""}`, ev, depth);
      break;
    case "agent_end": {
      const it = open[key("run")];
      if (it) { it.end = ev.timestamp; it.events.push(ev); it.detail = `${ev.reason}`; }
      break;
    }
    case "turn_start": {
      open[key("turn")] = item(run, "turn", `turn ${ev.turn_index}`, ev, depth);
      const asked = (run.requests ||= {})[ev.loop_id]; // recorded before the item was open
      delete run.requests[ev.loop_id];
      open[key("model")] = item(run, "model", "model request", ev, depth + 1, { firstToken: null, request: asked });
      break;
    }
    case "custom": {
      if (ev.name === REQUEST_EVENT) {
        const it = open[key("model")];
        if (ev.value?.purpose && ev.value.purpose !== "turn") {
          item(run, "model", `model request · ${ev.value.purpose}`, ev, depth + 1, { firstToken: null, request: ev.value }).end = ev.timestamp;
        } else if (it && !it.request) it.request = ev.value;
        else (run.requests ||= {})[ev.loop_id] = ev.value;
      }
      const it = open[key("run")];
      if (it) it.events.push(ev);
      break;
    }
    case "message_update": {
      const it = open[key("model")];
      if (it) {
        if (it.firstToken === null) it.firstToken = ev.timestamp;
        if (it.events.length < 400) it.events.push(ev); else it.clipped = (it.clipped || 0) + 1;
      }
      break;
    }
    case "message_start":
    case "message_end": {
      const it = open[key("model")];
      if (it && ev.message?.role === "assistant") {
        it.events.push(ev);
        if (ev.type === "message_end") {
          it.end = ev.timestamp;
          const u = ev.message.usage || {};
          it.usage = u;
          it.detail = `in ${u.input ?? 0} · out ${u.output ?? 0}${u.cost_usd != null ? ` · $${u.cost_usd.toFixed(5)}` : ""}`;
          delete open[key("model")];
        }
      }
      break;
    }
    case "tool_execution_start":
      open[`tool:${ev.tool_call_id}`] = item(run, "tool", `tool ${ev.tool_name}`, ev, depth + 1, { callId: ev.tool_call_id });
      break;
    case "tool_execution_update":
    case "tool_execution_end": {
      const it = open[`tool:${ev.tool_call_id}`];
      if (it) {
        it.events.push(ev);
        if (ev.type === "tool_execution_end") {
          it.end = ev.timestamp;
          it.detail = ev.is_error ? "error" : "ok";
          it.images = imagesOf(ev.result?.content);
          const files = (ev.result?.content || []).filter((b) => b.type === "file" || b.type === "image");
          if (files.length) it.detail += ` · ${files.length} file${files.length > 1 ? "s" : ""}`;
        }
      }
      break;
    }
    case "turn_end": {
      const it = open[key("turn")];
      if (it) { it.end = ev.timestamp; it.events.push(ev); }
      const m = open[key("model")];
      if (m && m.end === null) { m.end = ev.timestamp; delete open[key("model")]; }
      break;
    }
    case "provider_retry":
      item(run, "retry", `retry ${ev.attempt}/${ev.max_retries} · ${ev.error_kind}`, ev, depth + 1).end = ev.timestamp;
      break;
    case "provider_fallback":
      item(run, "retry", `fallback → ${ev.to_provider}:${ev.to_model} · ${ev.error_kind}`, ev, depth + 1).end = ev.timestamp;
      break;
    case "compaction_start":
      open[key("compaction")] = item(run, "compaction", `compaction · ${ev.reason}`, ev, depth);
      break;
    case "compaction_end": {
      const it = open[key("compaction")];
      if (it) { it.end = ev.timestamp; it.events.push(ev); it.detail = `${ev.tokens_before} → ${ev.tokens_after} tokens`; }
      break;
    }
    default: {
      const it = open[key("run")];
      if (it) it.events.push(ev);
    }
  }
}

// The images among a tool result's blocks (an image, or a file of an image type, inline), as
// data URLs for thumbnails.
function imagesOf(blocks) {
  return (blocks || [])
    .filter((b) => b.data && (b.type === "image" || (b.type === "file" && String(b.mime_type).startsWith("image/"))))
    .map((b) => ({ src: `data:${b.mime_type};base64,${b.data}`, name: b.name || b.mime_type }));
}

// Events as text with files' bytes left out (a PDF is megabytes of base64): the start of
// each, and how long it is.
function clipBytes(key, value) {
  if (key === "data" && typeof value === "string" && value.length > 120) return `${value.slice(0, 32)}… (${value.length} base64 characters)`;
  return value;
}

// A pane follows its tail (new timeline items, a live run's events) while the user is at
// its bottom; scrolled up to read, it stays where it is.
function atBottom(box) {
  return box.scrollHeight - box.scrollTop - box.clientHeight < 24;
}

// A model request as text: its settings, system prompt, tool schemas and messages as sent.
function requestText(req) {
  const out = [];
  const skip = new Set(["model", "purpose", "system_prompt", "tools", "messages"]);
  const settings = Object.entries(req).filter(([k, v]) => !skip.has(k) && v !== null && !(typeof v === "object" && !Object.keys(v).length));
  out.push(`${req.purpose || "turn"} · ${req.model || "(model)"}`);
  for (const [k, v] of settings) out.push(`${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`);
  out.push("", "── system prompt ──", req.system_prompt || "(none)");
  const tools = req.tools || [];
  out.push("", `── tools (${tools.length}) ──`);
  for (const t of tools) out.push(`${t.name}: ${t.description || ""}`, JSON.stringify(t.parameters, null, 2));
  const messages = req.messages || [];
  out.push("", `── messages (${messages.length}) ──`);
  for (const m of messages) {
    const who = m.role === "tool_result" ? `tool_result ${m.tool_name} (${m.tool_call_id})${m.is_error ? " error" : ""}` : m.role;
    out.push(`[${who}]`);
    const blocks = typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content || [];
    for (const b of blocks) {
      if (b.type === "text") out.push(b.text);
      else if (b.type === "thinking") out.push(`(thinking) ${b.thinking}`);
      else if (b.type === "tool_call") out.push(`→ ${b.name}(${JSON.stringify(b.arguments)}) [${b.id}]`);
      else if (b.type === "image") out.push(`(image ${b.mime_type || ""})`);
      else if (b.type === "file") out.push(`(file ${b.name || b.url || b.file_id || ""} ${b.mime_type}${b.size != null ? `, ${b.size} bytes` : ""})`);
      else out.push(JSON.stringify(b));
    }
  }
  return out.join("\n");
}

// An inspector over its panes: `timeline` (the items), `raw` and `rawTitle` (the events
// pane and its title) and `viewRequest` (the toggle between an item's events and the
// request it sent). Add runs with addRun, their events with add, then render (or queue).
function makeInspector({ timeline, raw, rawTitle, viewRequest, empty = "Runs show here as they happen.", hint = "Click an item of the timeline to see its events." }) {
  const ins = { runs: new Map(), selected: null, view: "events" };
  let timer = null;

  ins.addRun = (id) => {
    if (!ins.runs.has(id)) ins.runs.set(id, newRun(id, ins.runs.size + 1));
    return ins.runs.get(id);
  };
  ins.add = (run, event) => { run.events.push(event); digest(run, event); };
  ins.queue = () => {
    if (timer) return;
    timer = setTimeout(() => { timer = null; ins.render(); }, 60);
  };
  ins.clear = () => {
    ins.runs.clear();
    ins.selected = null;
    timeline.replaceChildren();
    raw.textContent = hint;
    rawTitle.textContent = "";
  };
  ins.select = (it) => {
    ins.selected = it;
    ins.view = "events";
    raw.textContent = "";
    raw.scrollTop = 0;
    ins.render();
    raw.scrollTop = 0;
  };

  ins.render = () => {
    const follow = atBottom(timeline);
    timeline.replaceChildren();
    for (const run of ins.runs.values()) {
      if (run.t0 === null) continue;
      const span = Math.max(1, (run.done ? run.last : Math.max(run.last, Date.now())) - run.t0);
      for (const it of run.items) {
        const end = it.end ?? (run.done ? run.last : Date.now());
        const bar = el("div", { class: "bar" });
        bar.style.left = `${((it.start - run.t0) / span) * 100}%`;
        bar.style.width = `${Math.max(0.6, ((end - it.start) / span) * 100)}%`;
        if (it.kind === "model" && it.firstToken !== null) {
          const ttft = el("div", { class: "ttft" });
          ttft.style.width = `${((it.firstToken - it.start) / Math.max(1, end - it.start)) * 100}%`;
          bar.append(ttft);
        }
        const facts = [];
        if (it.kind === "model") facts.push(`ttft ${it.firstToken !== null ? fmtMs(it.firstToken - it.start) : "…"}`);
        facts.push(it.end !== null ? fmtMs(it.end - it.start) : "running");
        if (it.detail) facts.push(it.detail);
        const row = el("button", { type: "button", class: `item ${it.kind}`, "data-testid": "timeline-item", "data-kind": it.kind },
          el("span", { class: "label", text: it.label }),
          el("span", { class: "facts", text: facts.join(" · ") }),
          el("span", { class: "track" }, bar));
        if (it.images?.length) { // what a tool made, at a glance
          row.append(el("span", { class: "thumbs" }, ...it.images.map((img) => el("img", { src: img.src, alt: img.name, title: img.name, "data-testid": "inspector-image" }))));
        }
        row.style.paddingLeft = `${0.4 + it.depth * 0.9}rem`;
        if (it === ins.selected) row.classList.add("selected");
        row.addEventListener("click", () => ins.select(it));
        timeline.append(row);
      }
    }
    if (!timeline.childElementCount) timeline.append(el("div", { class: "muted", text: empty }));
    if (follow) timeline.scrollTop = timeline.scrollHeight;
    ins.renderRaw();
  };

  // The events pane: the selected item's events, else the newest run's latest events, live.
  ins.renderRaw = () => {
    const it = ins.selected;
    viewRequest.hidden = !it?.request;
    viewRequest.textContent = ins.view === "request" ? "Events" : "Request sent";
    viewRequest.setAttribute("aria-pressed", String(ins.view === "request"));
    let events;
    let title;
    if (it?.request && ins.view === "request") {
      rawTitle.textContent = `· ${it.label} · what the model was sent`;
      const text = requestText(it.request);
      if (raw.textContent !== text) raw.textContent = text;
      return;
    }
    if (it) {
      events = it.events;
      title = `· ${it.label} · ${it.events.length} events${it.clipped ? ` (+${it.clipped} deltas not kept)` : ""}`;
    } else {
      const run = [...ins.runs.values()].filter((r) => r.events.length).at(-1);
      if (!run) return;
      events = run.events.slice(-LIVE_TAIL);
      const shown = events.length < run.events.length ? `the last ${events.length} of ${run.events.length}` : `${events.length}`;
      title = `· run ${run.n} · ${shown} events${run.done ? "" : " · live"} · click an item for its own`;
    }
    rawTitle.textContent = title;
    const text = JSON.stringify(events, clipBytes, 2);
    if (text === raw.textContent) return;
    const follow = atBottom(raw);
    raw.textContent = text;
    if (follow) raw.scrollTop = raw.scrollHeight;
  };

  viewRequest.addEventListener("click", () => {
    ins.view = ins.view === "request" ? "events" : "request";
    raw.scrollTop = 0;
    ins.renderRaw();
  });
  return ins;
}

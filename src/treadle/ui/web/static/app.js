// treadle ui: a chat over treadle's Vercel AI UI message stream endpoint, a live run
// inspector over the raw events (inspector.js, loaded first), and the session store. Plain
// JS, no build step, nothing fetched from elsewhere. Model and user text only ever reach the page as text nodes
// (textContent / createTextNode): never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  chatId: null,
  running: false,
  messages: [], // {id, role, parts, el, index, stopped}
  current: null, // the assistant message the stream writes into
  parts: new Map(), // stream part id -> part
  tools: new Map(), // toolCallId -> part
  splitNext: false,
  lastEventId: null,
  reconnects: 0, // how often a dropped stream was resumed (shown to tests)
  asked: new Map(), // toolCallId -> the question of the hook that asked (Ask(prompt=...))
};

// ---------- small DOM helpers (el and fmtMs: inspector.js) ----------

// crypto.randomUUID exists in secure contexts only (not on http://192.168.x.y): this works
// everywhere
function uid() {
  return [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function compactJSON(value) {
  const flat = JSON.stringify(value);
  return flat.length <= 72 ? flat : JSON.stringify(value, null, 2);
}

function setStatus(text) { $("status").textContent = text; }

// ---------- Markdown, safely: every piece of text becomes a text node ----------

// A scanner rather than one regex: a regex whose lazy bodies (`[^\]]+` up to a `](`) are
// tried again from every `[`, `*` or `_` took quadratic time on a long line (a 160 KB answer
// froze the tab). Here each closing mark is looked up in a table of "the next one after
// position i", built once per line, so a line renders in linear time.
const WORD = /[A-Za-z0-9_]/;
const SPACE = /\s/;

function nextTable(text, test) {
  const next = new Int32Array(text.length + 1);
  next[text.length] = -1;
  for (let i = text.length - 1; i >= 0; i -= 1) next[i] = test(text[i]) ? i : next[i + 1];
  return next;
}

function inline(text, into) {
  // `code`, **bold**, *em* / _em_, [label](http...) ; everything else is text
  const n = text.length;
  const tick = nextTable(text, (c) => c === "`");
  const star = nextTable(text, (c) => c === "*");
  const under = nextTable(text, (c) => c === "_");
  const close = nextTable(text, (c) => c === "]");
  const urlEnd = nextTable(text, (c) => c === ")" || SPACE.test(c));
  const word = (i) => i >= 0 && i < n && WORD.test(text[i]);
  const at = (i) => (i < n ? text[i] : "");
  let last = 0;
  let i = 0;
  const put = (start, end, node) => {
    if (start > last) into.append(document.createTextNode(text.slice(last, start)));
    into.append(node);
    last = end;
    i = end;
  };
  while (i < n) {
    const c = text[i];
    if (c === "`") {
      let run = 1;
      while (at(i + run) === "`") run += 1;
      const j = tick[i + run];
      if (j < 0) { i += run; continue; } // no backtick after this run: none of it opens code
      let closing = 1;
      while (at(j + closing) === "`") closing += 1;
      const k = Math.min(run, closing); // the opening run as long as the closing one
      put(i + run - k, j + k, el("code", { text: text.slice(i + run, j) }));
      continue;
    }
    if (c === "*") {
      if (at(i + 1) === "*") {
        const q = star[i + 2];
        if (q > i + 2 && at(q + 1) === "*") {
          const b = el("strong");
          inline(text.slice(i + 2, q), b);
          put(i, q + 2, b);
          continue;
        }
      }
      const next = at(i + 1);
      if (!word(i - 1) && at(i - 1) !== "*" && next && next !== "*" && !SPACE.test(next)) {
        const q = star[i + 1];
        if (q > 0 && !word(q + 1) && at(q + 1) !== "*") {
          const em = el("em");
          inline(text.slice(i + 1, q), em);
          put(i, q + 1, em);
          continue;
        }
      }
    } else if (c === "_") {
      const next = at(i + 1);
      if (!word(i - 1) && next && next !== "_" && !SPACE.test(next)) {
        const q = under[i + 1];
        if (q > 0 && !word(q + 1)) {
          const em = el("em");
          inline(text.slice(i + 1, q), em);
          put(i, q + 1, em);
          continue;
        }
      }
    } else if (c === "[") {
      const q = close[i + 1];
      if (q > i + 1 && at(q + 1) === "(") {
        const r = urlEnd[q + 2];
        if (r > q + 2 && text[r] === ")") {
          const label = text.slice(i + 1, q);
          const href = text.slice(q + 2, r);
          if (/^https?:\/\//i.test(href)) {
            const a = el("a", { rel: "noopener noreferrer", target: "_blank" });
            a.href = href;
            a.textContent = label;
            put(i, r + 1, a);
          } else put(i, r + 1, document.createTextNode(text.slice(i, r + 1)));
          continue;
        }
      }
    }
    i += 1;
  }
  if (last < n) into.append(document.createTextNode(text.slice(last)));
}

// GFM tables: a header row, then a rule row (| --- | :-: |) with as many cells, then body
// rows. Cells are cut at each "|" not escaped by a backslash, one pass over the line; each
// cell of the rule is checked on its own (one regex over the whole row, with its optional
// spaces and pipes, could backtrack quadratically on a long line of spaces).
const RULE_CELL = /^:?-+:?$/;

function isTableRule(line, header) {
  if (!line.includes("-")) return false;
  const rule = cells(line);
  return rule.length === cells(header).length && rule.every((c) => RULE_CELL.test(c));
}

function cells(line) {
  const out = [];
  let cell = "";
  for (let i = 0; i < line.length; i += 1) {
    const c = line[i];
    if (c === "\\" && line[i + 1] === "|") { cell += "|"; i += 1; } else if (c === "|") { out.push(cell); cell = ""; } else cell += c;
  }
  out.push(cell);
  if (out.length > 1 && !out[0].trim()) out.shift(); // a leading "|"
  if (out.length > 1 && !out[out.length - 1].trim()) out.pop(); // a trailing "|"
  return out.map((c) => c.trim());
}

// A fenced code block, as text, with a button that copies it.
function codeBlock(text, lang) {
  const code = el("code", { text });
  if (lang) code.dataset.lang = lang;
  const copy = el("button", { type: "button", class: "copy", "data-testid": "copy-code", text: "Copy", "aria-label": "Copy the code" });
  copy.addEventListener("click", () => copyText(text, copy));
  return el("div", { class: "codeblock" }, copy, el("pre", { class: "code" }, code));
}

async function copyText(text, button) {
  let done = false;
  try {
    await navigator.clipboard.writeText(text); // secure contexts (127.0.0.1, https)
    done = true;
  } catch (_) {
    // plain http on a LAN address: a hidden textarea and the older copy command
    const area = el("textarea", { class: "offscreen" });
    area.value = text;
    document.body.append(area);
    area.select();
    try { done = document.execCommand("copy"); } catch (_) { done = false; }
    area.remove();
  }
  button.textContent = done ? "Copied" : "Copy failed";
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
}

function markdown(src, into) {
  into.replaceChildren();
  const lines = src.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  let para = [];
  const flush = () => {
    if (!para.length) return;
    const p = el("p");
    para.forEach((line, n) => { if (n) p.append(el("br")); inline(line, p); });
    into.append(p);
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```+|~~~+)\s*([\w+-]*)/);
    if (fence) {
      flush();
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i += 1;
      into.append(codeBlock(body.join("\n"), fence[2]));
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && isTableRule(lines[i + 1], line)) {
      flush();
      const head = cells(line);
      const aligns = cells(lines[i + 1]).map((c) => (c.endsWith(":") ? (c.startsWith(":") ? "center" : "right") : ""));
      const row = (text, tag) => {
        const tr = el("tr");
        cells(text).slice(0, head.length).forEach((c, n) => {
          const td = el(tag);
          if (aligns[n]) td.style.textAlign = aligns[n];
          inline(c, td);
          tr.append(td);
        });
        return tr;
      };
      const thead = el("thead", {}, row(line, "th"));
      const tbody = el("tbody");
      i += 2;
      while (i < lines.length && lines[i].includes("|") && lines[i].trim()) tbody.append(row(lines[i++], "td"));
      into.append(el("div", { class: "table-wrap" }, el("table", {}, thead, tbody)));
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) {
      flush();
      const h = el(`h${Math.min(6, heading[1].length + 2)}`);
      inline(heading[2], h);
      into.append(h);
      i += 1;
      continue;
    }
    const item = line.match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
    if (item) {
      flush();
      const ordered = /\d/.test(item[1]);
      const list = el(ordered ? "ol" : "ul");
      while (i < lines.length) {
        const m = lines[i].match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
        if (!m || /\d/.test(m[1]) !== ordered) break;
        const li = el("li");
        inline(m[2], li);
        list.append(li);
        i += 1;
      }
      into.append(list);
      continue;
    }
    if (/^\s*>/.test(line)) {
      flush();
      const quote = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) quote.push(lines[i++].replace(/^\s*>\s?/, ""));
      const bq = el("blockquote");
      markdown(quote.join("\n"), bq);
      into.append(bq);
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { flush(); into.append(el("hr")); i += 1; continue; }
    if (!line.trim()) { flush(); i += 1; continue; }
    para.push(line);
    i += 1;
  }
  flush();
}

// ---------- messages ----------

function messageEl(message) {
  const body = el("div", { class: "body" });
  const node = el("div", { class: `msg ${message.role}`, "data-testid": "message", "data-role": message.role },
    el("div", { class: "who", text: message.role === "user" ? "You" : "Agent" }), body);
  message.el = node;
  message.body = body;
  if (message.index !== undefined) addBranch(message);
  return node;
}

function addBranch(message) {
  if (message.branchEl || message.index === undefined) return;
  const b = el("button", { type: "button", class: "branch", "data-testid": "branch", title: message.role === "user" ? "A new conversation that asks this again" : "A new conversation from here" }, branchIcon(), document.createTextNode(" Branch"));
  b.addEventListener("click", () => branchFrom(message));
  message.branchEl = b;
  message.el.querySelector(".who").append(b);
}

// The branch mark, drawn (a fork glyph such as U+2442 is missing from common fonts).
function branchIcon() {
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("class", "icon");
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS(NS, "path");
  path.setAttribute("d", "M5 3v10M5 9c0-3 6-2 6-6M5 13a1.5 1.5 0 1 0 0 .01M11 3a1.5 1.5 0 1 0 0 .01M5 3a1.5 1.5 0 1 0 0 .01");
  svg.append(path);
  return svg;
}

function addMessage(message) {
  $("empty")?.remove();
  state.messages.push(message);
  $("messages").append(messageEl(message));
  for (const part of message.parts) renderPart(message, part);
  if (message.stopped) markStopped(message);
  scrollDown();
  return message;
}

// An opened conversation shows its newest message, as every chat app does.
function scrollToEnd() {
  const box = $("messages");
  box.scrollTop = box.scrollHeight;
}

function scrollDown() {
  const box = $("messages");
  if (box.scrollHeight - box.scrollTop - box.clientHeight < 160) box.scrollTop = box.scrollHeight;
}

function renderPart(message, part) {
  if (part.type === "step-start") return;
  if (!part.el) {
    if (part.type === "text") part.el = el("div", { class: "md" });
    else if (part.type === "reasoning") {
      part.inner = el("div", { class: "thinking-text" });
      part.el = el("details", { class: "thinking" }, el("summary", { text: "Thinking" }), part.inner);
    } else if (part.type === "error") part.el = el("div", { class: "error", role: "alert" });
    else if (part.type.startsWith("tool-")) part.el = toolCard(part);
    else if (part.type === "file") { part.el = filePreview(part); message.body.append(part.el); return; }
    else if (part.type === "source-url") { sourceLink(message, part); return; }
    else return;
    message.body.append(part.el);
  }
  if (part.type === "text") markdown(part.text, part.el);
  else if (part.type === "reasoning") part.inner.textContent = part.text;
  else if (part.type === "error") part.el.textContent = part.errorText;
  else updateTool(part);
}

// The web pages an answer cites, as links in one line under it (an address that is not
// http(s) is shown, never followed).
function sourceLink(message, part) {
  if (!message.sources) {
    message.sources = el("div", { class: "sources", "data-testid": "sources" }, el("span", { class: "sources-label", text: "Sources:" }));
  }
  message.body.append(message.sources); // stays after the parts that came before it
  let label = part.title;
  try { label = label || new URL(part.url).hostname; } catch { label = label || part.url; }
  const link = /^https?:\/\//i.test(part.url)
    ? el("a", { href: part.url, rel: "noopener noreferrer", target: "_blank", title: part.url, "data-testid": "source", text: label })
    : el("span", { title: part.url, "data-testid": "source", text: label });
  part.el = link;
  message.sources.append(link);
}

function toolCard(part) {
  state.tools.set(part.toolCallId, part);
  const name = part.toolName || part.type.slice(5);
  part.els = {
    status: el("span", { class: "tool-status" }),
    time: el("span", { class: "tool-time" }),
    args: el("pre", { class: "args" }),
    result: el("pre", { class: "result" }),
    buttons: el("div", { class: "approval" }),
    more: el("button", { type: "button", class: "show-all", "data-testid": "show-all", hidden: "" }),
  };
  part.els.more.addEventListener("click", () => { part.expanded = !part.expanded; updateTool(part); });
  const card = el("div", { class: "tool", "data-testid": "tool-call", "data-tool": name, "data-call-id": part.toolCallId },
    el("div", { class: "tool-head" }, el("span", { class: "tool-name", text: name }), part.els.status, part.els.time),
    part.els.args, part.els.result, part.els.more, part.els.buttons);
  return card;
}

function updateTool(part) {
  const e = part.els;
  part.el.dataset.state = part.state;
  const labels = {
    "input-streaming": "preparing…", "input-available": "running…", "output-available": "done",
    "output-error": "error", "output-denied": "denied", "approval-requested": "needs approval",
    "approval-responded": "answered",
  };
  e.status.textContent = labels[part.state] || part.state;
  const args = part.input !== undefined ? compactJSON(part.input) : part.inputText || "";
  e.args.textContent = args;
  e.args.hidden = !args;
  let out = "";
  if (part.state === "output-available") out = typeof part.output === "string" ? part.output : JSON.stringify(part.output, null, 2);
  if (part.state === "output-error") out = part.errorText || "error";
  if (part.state === "output-denied") out = part.approval?.reason ? `Denied: ${part.approval.reason}` : "The call was denied.";
  showClipped(e.result, out, part);
  e.result.hidden = !out;
  e.result.classList.toggle("failed", part.state === "output-error" || part.state === "output-denied");
  const ms = part.durationMs ?? (part.finishedAt && part.startedAt ? part.finishedAt - part.startedAt : null);
  e.time.textContent = ms !== null ? fmtMs(ms) : "";
  if (part.state === "approval-requested" && !e.buttons.childElementCount) {
    // the hook's question (Ask(prompt=...)), a reason for a refusal, then the two answers
    const prompt = part.approval?.prompt;
    const reason = el("input", { type: "text", class: "deny-reason", "data-testid": "deny-reason", placeholder: "Reason (optional, sent to the model on Deny)", "aria-label": "Reason for denying" });
    const yes = el("button", { type: "button", class: "approve", "data-testid": "approve", text: "Approve" });
    const no = el("button", { type: "button", class: "deny", "data-testid": "deny", text: "Deny" });
    yes.addEventListener("click", () => answerApproval(part, true));
    no.addEventListener("click", () => answerApproval(part, false, reason.value.trim()));
    reason.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); no.click(); } });
    if (prompt) e.buttons.append(el("div", { class: "approval-prompt", "data-testid": "approval-prompt", text: prompt }));
    e.buttons.append(reason, yes, no);
  } else if (part.state !== "approval-requested") e.buttons.replaceChildren();
}

// A long result (a file, a log) shows its first lines; "Show all" shows the rest.
const CLIP_LINES = 30;
const CLIP_CHARS = 4000;

function showClipped(pre, text, part) {
  let shown = text;
  let lines = 0;
  if (!part.expanded && text.length > CLIP_CHARS / 2) {
    let cut = 0;
    while (cut < text.length && cut < CLIP_CHARS && lines < CLIP_LINES) {
      const next = text.indexOf("\n", cut);
      if (next < 0) { cut = text.length; break; }
      cut = next + 1;
      lines += 1;
    }
    shown = text.slice(0, Math.min(cut, CLIP_CHARS));
  }
  pre.textContent = shown;
  const more = part.els.more;
  if (shown.length < text.length) {
    let total = 1;
    for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) total += 1;
    more.textContent = `Show all (${total.toLocaleString()} lines, ${text.length.toLocaleString()} characters)`;
    more.hidden = false;
  } else more.hidden = !part.expanded;
  if (part.expanded && text.length > CLIP_CHARS / 2) more.textContent = "Show less";
}

function markStopped(message) {
  message.stopped = true;
  message.el.dataset.stopped = "true";
  if (!message.el.querySelector(".stopped-note")) message.body.append(el("div", { class: "stopped-note", text: "Stopped." }));
}

function ownerOf(part) {
  return state.messages.find((m) => m.parts.includes(part));
}

// ---------- the UI message stream ----------

function newAssistant(id) {
  state.current = addMessage({ id: id || uid(), role: "assistant", parts: [] });
  return state.current;
}

function addPart(part) {
  const m = state.current || newAssistant();
  m.parts.push(part);
  renderPart(m, part);
  scrollDown();
  return part;
}

function apply(chunk) {
  const t = chunk.type;
  if (t === "start") {
    const last = state.messages[state.messages.length - 1];
    state.current = last && last.role === "assistant" && last.id === chunk.messageId ? last : newAssistant(chunk.messageId);
  } else if (t === "start-step") {
    if (state.splitNext) { state.splitNext = false; newAssistant(state.current?.id); }
    (state.current || newAssistant()).parts.push({ type: "step-start" });
  } else if (t === "text-start" || t === "reasoning-start") {
    state.parts.set(chunk.id, addPart({ type: t === "text-start" ? "text" : "reasoning", text: "" }));
  } else if (t === "text-delta" || t === "reasoning-delta") {
    let part = state.parts.get(chunk.id);
    if (!part) state.parts.set(chunk.id, (part = addPart({ type: t === "text-delta" ? "text" : "reasoning", text: "" })));
    part.text += chunk.delta;
    queueRender(part);
  } else if (t === "text-end" || t === "reasoning-end") {
    const part = state.parts.get(chunk.id);
    if (part) renderPart(ownerOf(part) || state.current, part);
  } else if (t === "tool-input-start") {
    addPart({ type: `tool-${chunk.toolName}`, toolName: chunk.toolName, toolCallId: chunk.toolCallId, state: "input-streaming", inputText: "" });
  } else if (t === "data-approval-prompt") {
    state.asked.set(chunk.data?.toolCallId, String(chunk.data?.prompt ?? ""));
  } else if (t.startsWith("tool-")) {
    let part = state.tools.get(chunk.toolCallId);
    if (!part) part = addPart({ type: `tool-${chunk.toolName || "tool"}`, toolName: chunk.toolName, toolCallId: chunk.toolCallId, state: "input-streaming", inputText: "" });
    if (t === "tool-input-delta") part.inputText += chunk.inputTextDelta;
    else if (t === "tool-input-available") { part.input = chunk.input; part.state = "input-available"; part.startedAt = Date.now(); }
    else if (t === "tool-output-available") { part.output = chunk.output; part.state = "output-available"; part.finishedAt = Date.now(); }
    else if (t === "tool-output-error") { part.errorText = chunk.errorText; part.state = "output-error"; part.finishedAt = Date.now(); }
    else if (t === "tool-output-denied") { part.state = "output-denied"; }
    else if (t === "tool-approval-request") { part.state = "approval-requested"; part.approval = { id: chunk.approvalId, prompt: state.asked.get(chunk.toolCallId) }; }
    updateTool(part);
  } else if (t === "source-url") { // a web page the answer cites: a link under it
    addPart({ type: "source-url", sourceId: chunk.sourceId, url: chunk.url, title: chunk.title });
  } else if (t === "file") { // a tool's file (an image, a PDF): after the tool's output
    addPart({ type: "file", url: chunk.url, mediaType: chunk.mediaType, providerMetadata: chunk.providerMetadata });
  } else if (t === "error") {
    addPart({ type: "error", errorText: chunk.errorText });
  } else if (t === "abort") {
    if (state.current) markStopped(state.current);
  } else if (t === "finish") {
    if (state.current) state.current.el.dataset.finish = chunk.finishReason || "";
  }
}

const dirty = new Set();
let renderTimer = null;
function queueRender(part) {
  dirty.add(part);
  if (renderTimer) return;
  renderTimer = setTimeout(() => {
    renderTimer = null;
    for (const p of dirty) renderPart(ownerOf(p) || state.current, p);
    dirty.clear();
    scrollDown();
  }, 16);
}

async function readSSE(response, onFrame) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let id = null;
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("id:")) id = line.slice(3).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) onFrame(id, data.join("\n"));
    }
  }
}

function setRunning(running) {
  state.running = running;
  $("stop").disabled = !running;
  document.body.classList.toggle("running", running);
  $("message-input").placeholder = running ? "Steer the running answer…" : "Message the agent…";
  if (!running) flushRender();
}

function flushRender() {
  if (renderTimer) { clearTimeout(renderTimer); renderTimer = null; }
  for (const p of dirty) renderPart(ownerOf(p) || state.current, p);
  dirty.clear();
}

// Reads a run's stream to its end; a dropped connection is resumed after the last frame
// id received (Last-Event-ID), so nothing is lost or shown twice.
async function consume(response) {
  let finished = false;
  const onFrame = (id, data) => {
    if (id) state.lastEventId = id;
    if (data === "[DONE]") { finished = true; return; }
    try { apply(JSON.parse(data)); } catch (err) { console.error(err); }
  };
  try { await readSSE(response, onFrame); } catch (err) { console.warn("stream dropped", err); }
  let tries = 0;
  while (!finished && tries < 50) {
    tries += 1;
    state.reconnects += 1;
    setStatus("reconnecting…");
    await new Promise((r) => setTimeout(r, Math.min(2000, 200 * tries)));
    try {
      const headers = state.lastEventId ? { "last-event-id": state.lastEventId } : {};
      const again = await fetch(`api/chat/${encodeURIComponent(state.chatId)}/stream`, { headers });
      if (again.status === 204) break;
      if (!again.ok) continue;
      setStatus("");
      await readSSE(again, onFrame);
    } catch (err) { console.warn("stream dropped", err); }
  }
  setStatus("");
}

async function post(url, body) {
  return fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

async function runRequest(messages) {
  setRunning(true);
  state.lastEventId = null;
  state.parts.clear();
  try {
    const response = await post("api/chat", { id: state.chatId, messages, trigger: "submit-message" });
    if (!response.ok) {
      const text = await response.text();
      let message = text;
      try { message = JSON.parse(text).error || text; } catch (_) { /* plain text */ }
      addPart({ type: "error", errorText: message });
      return;
    }
    watchRun(response.headers.get("x-treadle-run-id"));
    await consume(response);
  } catch (err) {
    addPart({ type: "error", errorText: String(err) });
  } finally {
    setRunning(false);
    state.current = null;
    afterRun();
  }
}

async function afterRun() {
  await refreshSessions();
  if (!state.chatId) return;
  try {
    const r = await fetch(`api/sessions/${encodeURIComponent(state.chatId)}`);
    if (!r.ok) return;
    const data = await r.json();
    if (data.running) return;
    if (data.messages.length === state.messages.length) {
      data.messages.forEach((m, i) => { state.messages[i].index = m.index; addBranch(state.messages[i]); });
    }
  } catch (_) { /* the list stays without branch points */ }
}

// Calls waiting for a person's answer. While one waits the composer does not send: a new
// message would end the wait and the loop would deny the call unanswered (as Claude Code
// and Cursor do, the question is answered first; the text stays in the box).
function waitingApprovals() {
  return state.messages.flatMap((m) => m.parts).filter((p) => p.state === "approval-requested");
}

function send() {
  const input = $("message-input");
  const text = input.value.trim();
  if (!text && (state.running || !attached.length)) return;
  if (!state.running && waitingApprovals().length) {
    setStatus("A tool call is waiting for your answer: Approve or Deny it first (a reason typed beside Deny goes to the model).");
    waitingApprovals()[0].el.querySelector("[data-testid=approve]")?.scrollIntoView({ block: "nearest" });
    return;
  }
  input.value = "";
  setStatus("");
  if (state.running) {
    steer(text);
    if (attached.length) setStatus("The attached files go with your next message, once this answer ends.");
    return;
  }
  if (!state.chatId) openChat(uid());
  const parts = [{ type: "text", text }, ...takeAttachments()];
  const message = { id: uid(), role: "user", parts };
  addMessage(message);
  runRequest([{ id: message.id, role: "user", parts: parts.map((p) => ({ ...p })) }]);
}

async function steer(text) {
  addMessage({ id: uid(), role: "user", parts: [{ type: "text", text }], steering: true }).el.classList.add("steering");
  state.splitNext = true;
  const r = await post(`api/chat/${encodeURIComponent(state.chatId)}/steer`, { text });
  if (!r.ok) setStatus("the run had ended: send it again");
}

async function stop() {
  if (!state.running || !state.chatId) return;
  setStatus("stopping…");
  $("stop").disabled = true;
  await post(`api/chat/${encodeURIComponent(state.chatId)}/stop`, {});
}

function answerApproval(part, approved, reason = "") {
  part.state = "approval-responded";
  part.approval = { ...(part.approval || {}), approved };
  if (!approved && reason) part.approval.reason = reason;
  setStatus("");
  updateTool(part);
  const message = ownerOf(part);
  if (!message || message.parts.some((p) => p.state === "approval-requested")) return;
  const answered = message.parts
    .filter((p) => p.state === "approval-responded")
    .map((p) => ({ type: p.type, toolCallId: p.toolCallId, state: "approval-responded", input: p.input, approval: p.approval }));
  state.current = message;
  runRequest([{ id: message.id, role: "assistant", parts: answered }]);
}

// ---------- sessions ----------

function openChat(id) {
  state.chatId = id;
  history.replaceState(null, "", `#s=${encodeURIComponent(id)}`);
  highlightSession();
}

function clearChat() {
  state.messages = [];
  state.current = null;
  state.parts.clear();
  state.tools.clear();
  state.asked.clear();
  inspector.clear();
  $("messages").replaceChildren();
}

function newChat() {
  if (state.running) return;
  clearChat();
  state.chatId = null;
  history.replaceState(null, "", location.pathname + location.search);
  $("messages").append(el("div", { id: "empty", class: "empty", text: "A new conversation. Ask something." }));
  highlightSession();
  $("message-input").focus();
}

async function openSession(id) {
  if (state.running) return;
  const r = await fetch(`api/sessions/${encodeURIComponent(id)}`);
  if (r.status === 404) { clearChat(); openChat(id); return; }
  if (!r.ok) { setStatus(`could not open that session (${r.status})`); return; }
  const data = await r.json();
  clearChat();
  openChat(id);
  for (const m of data.messages) addMessage({ ...m, id: m.id });
  if (!data.messages.length) $("messages").append(el("div", { id: "empty", class: "empty", text: "No messages yet." }));
  scrollToEnd();
  const runs = await (await fetch(`api/chat/${encodeURIComponent(id)}/runs`)).json();
  for (const run of runs.runs) watchRun(run.id);
  if (data.running) resumeRun(id);
}

// A run is going on: replay its stream from the start (the stored history shown ends where
// it began), then follow it live.
async function resumeRun(id) {
  setRunning(true);
  state.lastEventId = null;
  state.parts.clear();
  try {
    const resp = await fetch(`api/chat/${encodeURIComponent(id)}/stream`);
    if (resp.status === 200) await consume(resp);
  } finally {
    setRunning(false);
    state.current = null;
    afterRun();
  }
}

// Branching from an answer keeps the conversation up to it. Branching from a question
// keeps what came before it and asks it again, so the new conversation is answered anew
// (as chat apps do when a question is edited or asked again).
async function branchFrom(message) {
  if (state.running || !state.chatId) return;
  const user = message.role === "user";
  const at = user ? message.index - 1 : message.index;
  const r = await post(`api/sessions/${encodeURIComponent(state.chatId)}/branch`, { at });
  if (!r.ok) { setStatus("could not branch here"); return; }
  const { id } = await r.json();
  await openSession(id);
  await refreshSessions();
  if (user) {
    const text = message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
    reattach(message.parts); // its files are asked with it again
    $("message-input").value = text;
    send();
  }
  $("message-input").focus();
}

async function refreshSessions() {
  let data;
  try { data = await (await fetch("api/sessions")).json(); } catch (_) { return; }
  const list = $("session-list");
  list.replaceChildren();
  for (const s of data.sessions) {
    const b = el("button", { type: "button", class: "session", "data-id": s.id },
      el("span", { class: "session-title", text: s.title }),
      el("span", { class: "session-meta" }, `${s.messages} msgs · ${new Date(s.updated_at).toLocaleString()}`,
        ...(s.parent_id ? [" · ", branchIcon(), " branch"] : []), s.running ? " · running" : ""));
    b.addEventListener("click", () => openSession(s.id));
    list.append(el("li", {}, b));
  }
  if (!data.sessions.length) list.append(el("li", { class: "muted", text: "No sessions yet." }));
  highlightSession();
}

function highlightSession() {
  for (const b of document.querySelectorAll("#session-list .session")) {
    b.classList.toggle("active", b.dataset.id === state.chatId);
    if (b.dataset.id === state.chatId) b.setAttribute("aria-current", "true"); else b.removeAttribute("aria-current");
  }
}

// ---------- inspector (inspector.js) ----------

const inspector = makeInspector({ timeline: $("timeline"), raw: $("raw"), rawTitle: $("raw-title"), viewRequest: $("view-request") });

function watchRun(runId) {
  if (!runId || inspector.runs.has(runId)) return;
  const run = inspector.addRun(runId);
  const source = new EventSource(`api/runs/${encodeURIComponent(runId)}/events`);
  run.source = source;
  source.onmessage = (e) => {
    const event = JSON.parse(e.data);
    inspector.add(run, event);
    if (event.type === "tool_execution_end") toolTook(event);
    inspector.queue();
  };
  source.addEventListener("end", () => { source.close(); run.done = true; inspector.queue(); });
  source.addEventListener("gap", () => { source.close(); run.done = true; });
}

// A tool call's card shows how long it took, as the inspector measured it.
function toolTook(ev) {
  const part = state.tools.get(ev.tool_call_id);
  if (part) { part.durationMs = ev.duration_ms; updateTool(part); }
}

// ---------- wiring ----------

function applyTheme(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}

async function start() {
  applyTheme(localStorage.getItem("treadle-theme"));
  $("theme").addEventListener("click", () => {
    const dark = document.documentElement.dataset.theme ? document.documentElement.dataset.theme === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
    const next = dark ? "light" : "dark";
    localStorage.setItem("treadle-theme", next);
    applyTheme(next);
  });
  $("toggle-inspector").addEventListener("click", (e) => {
    const hidden = document.body.classList.toggle("no-inspector");
    e.currentTarget.setAttribute("aria-pressed", String(!hidden));
  });
  $("composer").addEventListener("submit", (e) => { e.preventDefault(); send(); });
  $("message-input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
  });
  document.addEventListener("keydown", (e) => { if (e.key === "Escape" && state.running) { e.preventDefault(); stop(); } });
  $("stop").addEventListener("click", stop);
  $("new-chat").addEventListener("click", newChat);
  let info = null;
  try {
    info = await (await fetch("api/info")).json();
    $("agent-title").textContent = info.title;
    $("model").textContent = info.model;
    document.title = `${info.title} · treadle`;
  } catch (_) { /* the page works without it */ }
  wireFiles(info);
  inspector.render();
  await refreshSessions();
  const match = location.hash.match(/^#s=(.+)$/);
  if (match) await openSession(decodeURIComponent(match[1]));
  document.body.dataset.ready = "true";
  $("message-input").focus();
}

start();

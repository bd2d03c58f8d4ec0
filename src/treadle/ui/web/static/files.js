// Files in the chat: attached with the button, dropped on the page or pasted into the message
// box, each read into a data URL and sent as the AI SDK's `file` part with the next message
// (never with a steer); file parts shown in the chat, an image as itself and any other
// file as a chip with its name and size. Loaded before app.js, whose `$` and `setStatus`
// it uses once the page starts (wireFiles).
"use strict";

const attached = []; // {name, mediaType, size, url}: what the next message carries
let maxBodyBytes = 10_000_000; // the server's (api/info); a message's files travel in it

function fmtSize(n) {
  if (n === null || n === undefined) return "";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} kB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

// The bytes a data URL holds (its base64 length, less the padding).
function dataUrlSize(url) {
  if (!url || !url.startsWith("data:")) return null;
  const b64 = url.slice(url.indexOf(",") + 1);
  const padding = b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0;
  return Math.floor((b64.length * 3) / 4) - padding;
}

function readAsDataURL(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

// Attach files (a FileList or an array of File); one that cannot go is said in the status
// line and left out: an empty file, or one that would take the message past the server's
// body limit (base64 makes a file a third larger).
async function attachFiles(files) {
  const refused = [];
  for (const file of files) {
    const name = file.name || "pasted file";
    const carried = attached.reduce((n, f) => n + f.url.length, 0);
    if (!file.size) { refused.push(`${name} is empty`); continue; }
    if (Math.ceil(file.size / 3) * 4 + carried + 8192 > maxBodyBytes) {
      refused.push(`${name} (${fmtSize(file.size)}) is too large: this server takes at most ${fmtSize(maxBodyBytes)} per message, its files included (base64 makes them a third larger)`);
      continue;
    }
    try {
      const url = await readAsDataURL(file);
      attached.push({ name, mediaType: file.type || "", size: file.size, url });
    } catch (err) {
      refused.push(`could not read ${name}: ${err}`);
    }
  }
  setStatus(refused.join("; "));
  renderAttachments();
}

function renderAttachments() {
  const tray = $("attachments");
  tray.replaceChildren(...attached.map((file, i) => {
    const remove = el("button", { type: "button", class: "remove", title: `Remove ${file.name}`, "aria-label": `Remove ${file.name}`, "data-testid": "remove-attachment", text: "×" });
    remove.addEventListener("click", () => { attached.splice(i, 1); renderAttachments(); });
    return el("div", { class: "attachment", "data-testid": "attachment", "data-name": file.name },
      filePreview({ mediaType: file.mediaType, url: file.url, filename: file.name, size: file.size }), remove);
  }));
  tray.hidden = !attached.length;
}

// The file parts of the next message; the tray is emptied.
function takeAttachments() {
  const parts = attached.map((f) => ({ type: "file", mediaType: f.mediaType, filename: f.name, url: f.url }));
  attached.length = 0;
  renderAttachments();
  return parts;
}

// Put a sent message's files back in the tray (branching re-asks a question with them).
function reattach(parts) {
  for (const p of parts) {
    if (p.type === "file" && p.url?.startsWith("data:")) attached.push({ name: fileName(p), mediaType: p.mediaType, size: dataUrlSize(p.url), url: p.url });
  }
  renderAttachments();
}

function fileName(part) {
  return part.filename || part.providerMetadata?.treadle?.filename || "file";
}

// An image (inline: the page's CSP allows data: images only) as itself; any other file as a
// chip with its name and size, a link that downloads it.
function filePreview(part) {
  const name = fileName(part);
  const size = part.size ?? dataUrlSize(part.url);
  if (part.mediaType?.startsWith("image/") && part.url?.startsWith("data:")) {
    return el("figure", { class: "file-image", "data-testid": "file-image", "data-name": name, title: `${name} · ${fmtSize(size)}` },
      el("img", { src: part.url, alt: name }));
  }
  const facts = [part.mediaType || "file", fmtSize(size)].filter(Boolean).join(" · ");
  return el("a", { class: "file-chip", "data-testid": "file-chip", "data-name": name, href: part.url || undefined, download: name, title: name, rel: "noopener" },
    el("span", { class: "file-icon", "aria-hidden": "true", text: "▤" }),
    el("span", { class: "file-name", text: name }),
    el("span", { class: "file-facts", text: facts }));
}

function wireFiles(info) {
  if (info && Number.isFinite(info.max_body_bytes)) maxBodyBytes = info.max_body_bytes;
  const input = $("file-input");
  $("attach").addEventListener("click", () => input.click());
  input.addEventListener("change", async () => { await attachFiles([...input.files]); input.value = ""; });
  const hasFiles = (e) => [...(e.dataTransfer?.types || [])].includes("Files");
  document.addEventListener("dragover", (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    document.body.classList.add("dragging");
  });
  document.addEventListener("dragleave", (e) => { if (!e.relatedTarget) document.body.classList.remove("dragging"); });
  document.addEventListener("drop", (e) => {
    document.body.classList.remove("dragging");
    if (!e.dataTransfer?.files?.length) return;
    e.preventDefault(); // the browser would open the file instead
    attachFiles([...e.dataTransfer.files]);
  });
  $("message-input").addEventListener("paste", (e) => {
    const files = [...(e.clipboardData?.files || [])];
    if (!files.length) return;
    if (!e.clipboardData.types.includes("text/plain")) e.preventDefault(); // a copied image: no text
    attachFiles(files);
  });
}

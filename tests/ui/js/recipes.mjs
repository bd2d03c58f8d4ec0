// The resume recipes of docs/ui.md (extracted by tests/ui/test_official_clients.py into
// `snippets`), run with the official clients against treadle through a proxy that drops
// the connection (destroys the socket) mid-answer, as a network would:
//   runRecipes(base, snippets, { HttpAgent, DefaultChatTransport, readUIMessageStream })
import http from "node:http";
import path from "node:path";
import { pathToFileURL } from "node:url";

const unhandled = []; // the process's unhandled rejections, once runRecipes has started

// Forwards to `base`; the first `drops` streams lose their socket after `keep` frames
// (`server.drops` counts the connections it cut).
function droppingProxy(base, { keep, drops }) {
  let left = drops;
  const server = http.createServer((request, response) => {
    const body = [];
    request.on("data", (chunk) => body.push(chunk));
    request.on("end", async () => {
      const headers = { "content-type": "application/json" };
      if (request.headers["last-event-id"]) headers["last-event-id"] = request.headers["last-event-id"];
      const upstream = await fetch(base + request.url, {
        method: request.method,
        headers,
        body: request.method === "POST" ? Buffer.concat(body) : undefined,
      });
      const drop = upstream.status === 200 && left > 0;
      if (drop) left -= 1;
      response.writeHead(upstream.status, Object.fromEntries(upstream.headers));
      if (!upstream.body) return response.end();
      let frames = 0;
      let buffer = "";
      const decoder = new TextDecoder();
      for await (const chunk of upstream.body) {
        if (!drop) {
          response.write(chunk);
          continue;
        }
        buffer += decoder.decode(chunk, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, cut + 2);
          buffer = buffer.slice(cut + 2);
          frames += 1;
          if (frames === keep) {
            // This frame reaches the client; then the connection is just gone (no end of
            // the chunked body): what a network failure looks like to fetch.
            server.drops += 1;
            response.write(frame, () => response.socket.destroy());
            return;
          }
          response.write(frame);
        }
      }
      response.end();
    });
  });
  server.drops = 0;
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

export async function runRecipes(base, snippets, { HttpAgent, DefaultChatTransport, readUIMessageStream }) {
  const load = (name) => import(pathToFileURL(path.join(path.resolve(snippets), name)).href);
  const { recordingFetch } = await load("last-event-id.mjs");
  const { runResuming } = await load("ag-ui-resume.mjs");
  const { resumingStream } = await load("ai-sdk-resume.mjs");
  process.on("unhandledRejection", (error) => {
    unhandled.push(String(error));
  });
  const out = {};
  const settle = () => new Promise((resolve) => setTimeout(resolve, 200));

  // @ag-ui/client without the guard: a dropped socket (what the docs warn about).
  {
    const proxy = await droppingProxy(base, { keep: 8, drops: 1 });
    const agent = new HttpAgent({
      url: `http://127.0.0.1:${proxy.address().port}/agui`,
      threadId: "recipe-unguarded",
      initialMessages: [{ id: "u1", role: "user", content: "tell me a story" }],
    });
    const before = unhandled.length;
    let error = null;
    await agent.runAgent({ runId: "recipe-unguarded-run" }).catch((e) => { error = String(e); });
    await settle();
    out.unguarded = { error, unhandled: unhandled.slice(before) };
    proxy.close();
  }
  // The AG-UI recipe: two drops, resumed on the same runId with Last-Event-ID.
  {
    const proxy = await droppingProxy(base, { keep: 8, drops: 2 });
    const { fetch, cursor } = recordingFetch();
    const agent = new HttpAgent({
      url: `http://127.0.0.1:${proxy.address().port}/agui`,
      threadId: "recipe-agui",
      fetch,
      initialMessages: [{ id: "u1", role: "user", content: "tell me a story" }],
    });
    const before = unhandled.length;
    await runResuming(agent, cursor, { runId: "recipe-agui-run" });
    await settle();
    out.agui = {
      messages: agent.messages,
      drops: proxy.drops,
      lastEventId: cursor.lastEventId,
      unhandled: unhandled.slice(before),
      headers: agent.headers,
    };
    proxy.close();
  }
  // The AI SDK recipe: two drops, the chunks go on after each reconnect.
  {
    const proxy = await droppingProxy(base, { keep: 8, drops: 2 });
    const { fetch, cursor } = recordingFetch();
    const transport = new DefaultChatTransport({
      api: `http://127.0.0.1:${proxy.address().port}/api/chat`,
      fetch,
    });
    const chatId = "recipe-vercel";
    const messages = [{ id: "v-u1", role: "user", parts: [{ type: "text", text: "tell me a story" }] }];
    const first = await transport.sendMessages({
      chatId, messages, trigger: "submit-message", messageId: undefined, abortSignal: undefined,
    });
    const before = unhandled.length;
    let message = null;
    const stream = resumingStream(transport, cursor, { chatId, stream: first });
    for await (const m of readUIMessageStream({ stream, terminateOnError: true })) message = m;
    await settle();
    out.vercel = {
      message,
      drops: proxy.drops,
      lastEventId: cursor.lastEventId,
      unhandled: unhandled.slice(before),
    };
    proxy.close();
  }
  return out;
}

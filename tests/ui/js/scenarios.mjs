// The scenarios the official clients run against treadle's UI endpoints (examples/ui/app.py),
// as one function of the client packages, so that each Node setup (tests/ui/js: Node 20 and
// ai 6; tests/ui/js22: Node 22 and ai 7) passes in its own copies:
//   runAll(base, { HttpAgent, DefaultChatTransport, readUIMessageStream })
// returns what the clients rebuilt, as one JSON-able object.

export async function runAll(base, { HttpAgent, DefaultChatTransport, readUIMessageStream }) {
  // A fetch that lets `keep` SSE frames through and then ends the body, as a dropped
  // connection would, remembering the last frame's id (what a browser's EventSource keeps).
  function droppingFetch(keep) {
    const seen = { lastId: null, frames: 0 };
    const fetchFn = async (url, init) => {
      const response = await fetch(url, init);
      if (keep === null) return response;
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      const encoder = new TextEncoder();
      let buffer = "";
      const body = new ReadableStream({
        async pull(controller) {
          for (;;) {
            const cut = buffer.indexOf("\n\n");
            if (cut >= 0) {
              const frame = buffer.slice(0, cut + 2);
              buffer = buffer.slice(cut + 2);
              const id = frame.match(/^id: (.*)$/m);
              if (id) seen.lastId = id[1];
              seen.frames += 1;
              controller.enqueue(encoder.encode(frame));
              if (seen.frames >= keep) {
                await reader.cancel();
                controller.close();
              }
              return;
            }
            const { value, done } = await reader.read();
            if (done) {
              controller.close();
              return;
            }
            buffer += decoder.decode(value, { stream: true });
          }
        },
      });
      return new Response(body, { status: response.status, headers: response.headers });
    };
    return { fetchFn, seen };
  }

  function aguiAgent(threadId, text, fetchFn) {
    return new HttpAgent({
      url: `${base}/agui`,
      threadId,
      fetch: fetchFn,
      initialMessages: [{ id: `${threadId}-u1`, role: "user", content: text }],
    });
  }

  const pickColour = {
    name: "pick_colour",
    description: "Ask the user to pick a colour.",
    parameters: { type: "object", properties: { options: { type: "array", items: { type: "string" } } } },
  };

  async function agui() {
    const result = {};
    // Text, and a server tool round trip.
    for (const [key, text] of [
      ["text", "hello there"],
      ["tool", "what is the weather"],
      ["textAndTool", "the forecast please"],
    ]) {
      const agent = aguiAgent(`agui-${key}`, text);
      const events = [];
      await agent.runAgent({}, { onEvent: ({ event }) => { events.push(event.type); } });
      result[key] = { messages: agent.messages, events };
    }
    // A front-end tool: the run stops on it; the page answers; the next run goes on.
    {
      const agent = aguiAgent("agui-frontend", "pick a colour");
      await agent.runAgent({ tools: [pickColour] });
      const call = agent.messages.find((m) => m.toolCalls?.length)?.toolCalls[0];
      agent.addMessage({ id: "agui-frontend-t1", role: "tool", toolCallId: call.id, content: "blue" });
      await agent.runAgent({ tools: [pickColour] });
      result.frontend = { call, messages: agent.messages };
    }
    // An approval: the run ends with an interrupt; a resume entry approves it.
    {
      const agent = aguiAgent("agui-approval", "delete my notes");
      let outcome = null;
      await agent.runAgent({}, { onRunFinishedEvent: ({ event }) => { outcome = event.outcome; } });
      const interrupt = outcome.interrupts[0];
      await agent.runAgent({
        resume: [{ interruptId: interrupt.id, status: "resolved", payload: { approved: true } }],
      });
      result.approval = { interrupt, messages: agent.messages };
    }
    // A connection dropped mid-answer, resumed with Last-Event-ID on the same runId.
    {
      const { fetchFn, seen } = droppingFetch(12);
      const agent = aguiAgent("agui-resume", "tell me a story", fetchFn);
      const runId = "agui-resume-run";
      let failed = null;
      await agent.runAgent({ runId }).catch((e) => { failed = String(e); });
      const partial = agent.messages.filter((m) => m.role === "assistant").map((m) => m.content).join("");
      agent.headers = { ...agent.headers, "Last-Event-ID": seen.lastId };
      agent.fetch = (url, init) => fetch(url, init);
      await agent.runAgent({ runId });
      result.resume = { lastId: seen.lastId, partial, failed, messages: agent.messages };
    }
    // Shared state: a tool changes it; the client applies the snapshot and the JSON Patch.
    {
      const agent = aguiAgent("agui-state", "add a todo");
      agent.state = { todos: ["call mum"] };
      const kinds = [];
      await agent.runAgent({}, { onEvent: ({ event }) => { if (event.type.startsWith("STATE")) kinds.push(event.type); } });
      result.state = { state: agent.state, kinds };
    }
    // Files: a user message with a document part; a tool's image comes back as a part of
    // the tool message.
    {
      const pdf = Buffer.from("%PDF-1.7\n1 0 obj <</Type /Page>> endobj\n").toString("base64");
      const agent = new HttpAgent({
        url: `${base}/agui`,
        threadId: "agui-files",
        initialMessages: [
          {
            id: "agui-files-u1",
            role: "user",
            content: [
              { type: "text", text: "read this" },
              {
                type: "document",
                source: { type: "data", value: pdf, mimeType: "application/pdf" },
                metadata: { filename: "report.pdf" },
              },
            ],
          },
        ],
      });
      await agent.runAgent({});
      const chart = aguiAgent("agui-chart", "draw a chart");
      await chart.runAgent({});
      result.files = { messages: agent.messages, chart: chart.messages };
    }
    return result;
  }

  async function finalMessage(stream, message) {
    let last = null;
    for await (const m of readUIMessageStream({ stream, message, terminateOnError: true })) last = m;
    return last;
  }

  async function vercel() {
    const result = {};
    const transport = (fetchFn) => new DefaultChatTransport({ api: `${base}/api/chat`, fetch: fetchFn });
    const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
    const send = (t, chatId, messages) =>
      t.sendMessages({ chatId, messages, trigger: "submit-message", messageId: undefined, abortSignal: undefined });

    for (const [key, text] of [["text", "hello there"], ["tool", "what is the weather"], ["sources", "your sources?"]]) {
      const messages = [user(`${key}-u1`, text)];
      result[key] = await finalMessage(await send(transport(), `chat-${key}`, messages));
    }
    // An approval: tool-approval-request, then the answer goes back in the message.
    {
      const messages = [user("a-u1", "delete my notes")];
      const first = await finalMessage(await send(transport(), "chat-approval", messages));
      const part = first.parts.find((p) => p.type === "tool-delete_file");
      const answered = {
        ...first,
        parts: first.parts.map((p) =>
          p === part ? { ...p, state: "approval-responded", approval: { id: p.approval.id, approved: true } } : p,
        ),
      };
      const second = await finalMessage(await send(transport(), "chat-approval", [...messages, answered]), answered);
      result.approval = { first, second };
    }
    // A client-side tool: input-available, the page's output goes back, the run goes on.
    {
      const messages = [user("c-u1", "pick a colour")];
      const first = await finalMessage(await send(transport(), "chat-client-tool", messages));
      const answered = {
        ...first,
        parts: first.parts.map((p) =>
          p.type === "tool-pick_colour" ? { ...p, state: "output-available", output: "blue" } : p,
        ),
      };
      const second = await finalMessage(await send(transport(), "chat-client-tool", [...messages, answered]), answered);
      result.clientTool = { first, second };
    }
    // Dropped mid-answer; useChat's resume (GET {api}/{id}/stream) replays the run.
    {
      const { fetchFn, seen } = droppingFetch(10);
      const messages = [user("r-u1", "tell me a story")];
      const partial = await finalMessage(await send(transport(fetchFn), "chat-resume", messages));
      const again = await transport().reconnectToStream({ chatId: "chat-resume" });
      const resumed = again ? await finalMessage(again) : null;
      result.resume = { lastId: seen.lastId, partial, resumed };
    }
    // Files: a file part (a data URL) in the user's message; a tool's image is a file part.
    {
      const pdf = Buffer.from("%PDF-1.7\n1 0 obj <</Type /Page>> endobj\n").toString("base64");
      const sent = {
        id: "f-u1",
        role: "user",
        parts: [
          { type: "text", text: "read this" },
          { type: "file", mediaType: "application/pdf", filename: "report.pdf", url: `data:application/pdf;base64,${pdf}` },
        ],
      };
      const read = await finalMessage(await send(transport(), "chat-files", [sent]));
      const chart = await finalMessage(await send(transport(), "chat-chart", [user("ch-u1", "draw a chart")]));
      result.files = { read, chart };
    }
    return result;
  }

  return { agui: await agui(), vercel: await vercel() };
}

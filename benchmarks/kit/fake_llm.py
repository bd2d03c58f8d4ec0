#!/usr/bin/env python3
"""Deterministic, fast, OpenAI-compatible fake Chat Completions server.

Stdlib only (raw asyncio HTTP/1.1, keep-alive, chunked responses), so it can run
under any Python >= 3.9 and costs the benchmark as little CPU as possible.

Endpoints
  POST /v1/chat/completions   (also /chat/completions) stream=false|true,
                              stream_options.include_usage honoured
  GET  /health                -> "ok"
  GET  /v1/models             -> one fake model
  GET  /stats                 -> JSON request counters (for correctness checks)
  POST /reset                 -> zero the counters

Scripted conversation (the turn is derived from the request's history):
  turn 0 : tool call add({"a": 2, "b": 3})
  turn 1 : scenario "sequential": one more add({"a": 2, "b": 3})
           scenario "parallel"  : two parallel calls add(2,3) and add(2,3)
  final  : plain assistant text of --final-tokens tokens, streamed one token per
           chunk.  If the request offers a tool called `final_answer` (smolagents
           ToolCallingAgent ends a run only through that tool), the final turn is
           instead a call to final_answer({"answer": <same text>}), streamed as one
           argument delta per token.

The turn is computed by counting tool-result messages (role "tool") against the
scenario's cumulative call counts.  Libraries that do not send role "tool"
messages (smolagents renders observations as user text) are handled by counting
assistant messages instead (one per completed model turn).

The final text starts with "The sum is 5." only if every tool result the server
can see contains "5"; otherwise it starts with "BAD-TOOL-RESULT." so drivers'
correctness checks fail loudly.

The scenario can be chosen per server (--scenario) or per request through the
model name: a model name containing "parallel" selects the parallel scenario, one
containing "sequential" the sequential scenario.

Latency knobs (both default 0 so that only framework overhead is measured):
  --latency-ms        delay before the response headers (time to first byte)
  --token-latency-ms  delay between streamed chunks
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys

SCENARIOS = {"sequential": (1, 1), "parallel": (1, 2)}
TOOL_ARGS_JSON = '{"a": 2, "b": 3}'
# Split of the tool-call arguments into several streamed deltas (as real models do).
TOOL_ARG_PIECES = ['{"a', '": 2', ', "b"', ": ", "3}"]
assert "".join(TOOL_ARG_PIECES) == TOOL_ARGS_JSON
CREATED = 1700000000
FINGERPRINT = "fp_fake_llm"


def final_tokens(n: int, ok: bool = True) -> list[str]:
    """The final answer as a list of n tokens (n >= 1)."""
    first = "The sum is 5." if ok else "BAD-TOOL-RESULT."
    return [first] + [f" w{i}" for i in range(1, n)]


def final_text(n: int) -> str:
    """The exact final text a correct client must end up with."""
    return "".join(final_tokens(n))


# ----------------------------------------------------------------------------- logic


def _content_text(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                out.append(str(part.get("text", "")))
            else:
                out.append(str(part))
        return "".join(out)
    return str(content)


def plan_turn(req: dict, default_scenario: str):
    """Return (scenario, turn_index, results_ok). turn_index == len(calls) => final turn."""
    model = str(req.get("model", ""))
    scenario = default_scenario
    if "parallel" in model:
        scenario = "parallel"
    elif "sequential" in model:
        scenario = "sequential"
    calls = SCENARIOS[scenario]
    messages = req.get("messages") or []
    tool_msgs = [m for m in messages if m.get("role") == "tool"]
    if tool_msgs:
        n = len(tool_msgs)
        turn, acc = 0, 0
        for c in calls:
            if n >= acc + c:
                acc += c
                turn += 1
            else:
                break
        ok = all("5" in _content_text(m.get("content")) for m in tool_msgs)
    else:
        # Fallback: libraries that render tool results as user text.
        turn = min(sum(1 for m in messages if m.get("role") == "assistant"), len(calls))
        user_msgs = [m for m in messages if m.get("role") == "user"][1:]
        ok = all("5" in _content_text(m.get("content")) for m in user_msgs)
    return scenario, turn, ok


def _tool_names(req: dict) -> set[str]:
    names = set()
    for t in req.get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and "name" in fn:
            names.add(fn["name"])
    return names


def _dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"))


class Script:
    """Builds (and caches) response payloads."""

    def __init__(self, final_n: int):
        self.final_n = final_n
        self.cache: dict = {}

    def build(self, scenario, turn, ok, stream, include_usage, model, final_tool, prompt_tokens):
        key = (scenario, turn, ok, stream, include_usage, model, final_tool, prompt_tokens)
        hit = self.cache.get(key)
        if hit is None:
            hit = self._build(*key)
            if len(self.cache) > 4096:
                self.cache.clear()
            self.cache[key] = hit
        return hit

    def _build(self, scenario, turn, ok, stream, include_usage, model, final_tool, prompt_tokens):
        calls = SCENARIOS[scenario]
        cid = f"chatcmpl-fake-{scenario[0]}{turn}"
        if turn < len(calls):
            kind = "tools"
            tool_calls = [(f"call_t{turn}_{i}", "add", TOOL_ARG_PIECES) for i in range(calls[turn])]
            completion_tokens = 12 * len(tool_calls)
        elif final_tool:
            kind = "tools"
            toks = final_tokens(self.final_n, ok)
            args_pieces = ['{"answer": "'] + [json.dumps(t)[1:-1] for t in toks] + ['"}']
            tool_calls = [(f"call_t{turn}_final", "final_answer", args_pieces)]
            completion_tokens = len(toks) + 4
        else:
            kind = "text"
            toks = final_tokens(self.final_n, ok)
            completion_tokens = len(toks)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        if not stream:
            if kind == "tools":
                msg = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": tid,
                            "type": "function",
                            "function": {"name": name, "arguments": "".join(pieces)},
                        }
                        for tid, name, pieces in tool_calls
                    ],
                    "refusal": None,
                    "annotations": [],
                }
                finish = "tool_calls"
            else:
                msg = {
                    "role": "assistant",
                    "content": "".join(toks),
                    "refusal": None,
                    "annotations": [],
                }
                finish = "stop"
            body = {
                "id": cid,
                "object": "chat.completion",
                "created": CREATED,
                "model": model,
                "choices": [
                    {"index": 0, "message": msg, "logprobs": None, "finish_reason": finish}
                ],
                "usage": usage,
                "service_tier": "default",
                "system_fingerprint": FINGERPRINT,
            }
            return _dumps(body).encode()

        # Streaming: list of SSE event payloads (bytes), each "data: ...\n\n".
        base = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "service_tier": "default",
            "system_fingerprint": FINGERPRINT,
        }

        def chunk(delta, finish=None):
            d = dict(base)
            d["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
            if include_usage:
                d["usage"] = None
            return d

        events = []
        if kind == "tools":
            for idx, (tid, name, pieces) in enumerate(tool_calls):
                head = {
                    "index": idx,
                    "id": tid,
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
                if idx == 0:
                    events.append(
                        chunk(
                            {
                                "role": "assistant",
                                "content": None,
                                "tool_calls": [head],
                                "refusal": None,
                            }
                        )
                    )
                else:
                    events.append(chunk({"tool_calls": [head]}))
                for p in pieces:
                    events.append(
                        chunk({"tool_calls": [{"index": idx, "function": {"arguments": p}}]})
                    )
            events.append(chunk({}, "tool_calls"))
        else:
            events.append(chunk({"role": "assistant", "content": "", "refusal": None}))
            for t in toks:
                events.append(chunk({"content": t}))
            events.append(chunk({}, "stop"))
        if include_usage:
            d = dict(base)
            d["choices"] = []
            d["usage"] = usage
            events.append(d)
        payloads = [b"data: " + _dumps(e).encode() + b"\n\n" for e in events]
        payloads.append(b"data: [DONE]\n\n")
        return [b"%x\r\n%s\r\n" % (len(p), p) for p in payloads]


# ----------------------------------------------------------------------------- HTTP


class Stats:
    def __init__(self):
        self.reset()

    def reset(self):
        self.requests = 0
        self.stream = 0
        self.nonstream = 0
        self.final = 0
        self.final_bad = 0
        self.include_usage = 0
        self.connections = 0
        self.errors = 0

    def as_dict(self):
        return dict(self.__dict__)


class HTTPProtocol(asyncio.Protocol):
    MAX_BODY = 64 * 1024 * 1024

    def __init__(self, server: FakeServer):
        self.server = server
        self.buf = bytearray()
        self.transport = None
        self.queue: asyncio.Queue | None = None
        self.worker = None
        self.closed = False

    # --- asyncio.Protocol
    def connection_made(self, transport):
        self.transport = transport
        self.server.stats.connections += 1
        sock = transport.get_extra_info("socket")
        if sock is not None:
            import socket

            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def connection_lost(self, exc):
        self.closed = True
        if self.worker is not None:
            self.worker.cancel()

    def data_received(self, data):
        self.buf += data
        while True:
            req = self._parse()
            if req is None:
                return
            if self.server.needs_async:
                if self.queue is None:
                    self.queue = asyncio.Queue()
                    self.worker = asyncio.ensure_future(self._work())
                self.queue.put_nowait(req)
            else:
                self._respond_sync(*req)

    # --- parsing
    def _parse(self):
        buf = self.buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > 1 << 20:
                self._error(431, "headers too large")
            return None
        head = bytes(buf[:end]).decode("latin-1")
        lines = head.split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            self._error(400, "bad request line")
            return None
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        pos = end + 4
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = bytearray()
            while True:
                nl = buf.find(b"\r\n", pos)
                if nl < 0:
                    return None
                size = int(bytes(buf[pos:nl]).split(b";")[0], 16)
                if size == 0:
                    trailer_end = buf.find(b"\r\n\r\n", nl)
                    if trailer_end < 0:
                        return None
                    pos = trailer_end + 4
                    break
                if len(buf) < nl + 2 + size + 2:
                    return None
                body += buf[nl + 2 : nl + 2 + size]
                pos = nl + 2 + size + 2
            body = bytes(body)
        else:
            n = int(headers.get("content-length", "0") or 0)
            if n > self.MAX_BODY:
                self._error(413, "body too large")
                return None
            if len(buf) < pos + n:
                return None
            body = bytes(buf[pos : pos + n])
            pos += n
        del buf[:pos]
        keep = version.upper() != "HTTP/1.0" and headers.get("connection", "").lower() != "close"
        if version.upper() == "HTTP/1.0" and headers.get("connection", "").lower() == "keep-alive":
            keep = True
        return method.upper(), target, headers, body, keep

    # --- responses
    def _write_simple(self, status, ctype, body: bytes, keep):
        reason = {
            200: "OK",
            400: "Bad Request",
            404: "Not Found",
            405: "Method Not Allowed",
            413: "Payload Too Large",
            431: "Request Header Fields Too Large",
            500: "Internal Server Error",
        }.get(status, "OK")
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n"
        ).encode()
        self.transport.write(head + body)
        if not keep:
            self.transport.close()

    def _error(self, status, msg, keep=False):
        self.server.stats.errors += 1
        body = _dumps(
            {"error": {"message": msg, "type": "invalid_request_error", "code": None}}
        ).encode()
        self._write_simple(status, "application/json", body, keep)
        self.buf.clear()

    def _route(self, method, target, headers, body, keep):
        """Returns None if handled, else (payload, is_stream) for chat completions."""
        path = target.split("?", 1)[0]
        if path.endswith("/chat/completions"):
            if method != "POST":
                self._error(405, "method not allowed", keep)
                return None
            try:
                req = json.loads(body)
            except ValueError:
                self._error(400, "invalid JSON body", keep)
                return None
            return self.server.handle_chat(req, len(body))
        if path == "/health":
            self._write_simple(200, "text/plain", b"ok", keep)
        elif path.endswith("/models"):
            self._write_simple(
                200,
                "application/json",
                _dumps(
                    {
                        "object": "list",
                        "data": [
                            {
                                "id": "fake",
                                "object": "model",
                                "created": CREATED,
                                "owned_by": "fake",
                            }
                        ],
                    }
                ).encode(),
                keep,
            )
        elif path == "/stats":
            self._write_simple(
                200, "application/json", _dumps(self.server.stats.as_dict()).encode(), keep
            )
        elif path == "/reset":
            self.server.stats.reset()
            self._write_simple(200, "application/json", b'{"ok":true}', keep)
        else:
            self._error(404, f"no route {path}", keep)
        return None

    def _stream_head(self, keep):
        return (
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
            "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n"
            f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n"
        ).encode()

    def _respond_sync(self, method, target, headers, body, keep):
        routed = self._route(method, target, headers, body, keep)
        if routed is None:
            return
        payload, is_stream = routed
        if is_stream:
            self.transport.write(self._stream_head(keep) + b"".join(payload) + b"0\r\n\r\n")
            if not keep:
                self.transport.close()
        else:
            self._write_simple(200, "application/json", payload, keep)

    async def _work(self):
        lat = self.server.latency
        tok_lat = self.server.token_latency
        try:
            while True:
                method, target, headers, body, keep = await self.queue.get()
                routed = self._route(method, target, headers, body, keep)
                if routed is None:
                    continue
                payload, is_stream = routed
                if lat:
                    await asyncio.sleep(lat)
                if self.closed:
                    return
                if not is_stream:
                    self._write_simple(200, "application/json", payload, keep)
                    continue
                if tok_lat:
                    self.transport.write(self._stream_head(keep))
                    for i, p in enumerate(payload):
                        if i:
                            await asyncio.sleep(tok_lat)
                        if self.closed:
                            return
                        self.transport.write(p)
                    self.transport.write(b"0\r\n\r\n")
                else:
                    self.transport.write(self._stream_head(keep) + b"".join(payload) + b"0\r\n\r\n")
                if not keep:
                    self.transport.close()
                    return
        except asyncio.CancelledError:
            pass


class FakeServer:
    def __init__(
        self, scenario="sequential", final_n=200, latency_ms=0.0, token_latency_ms=0.0, log=False
    ):
        self.default_scenario = scenario
        self.script = Script(final_n)
        self.latency = latency_ms / 1000.0
        self.token_latency = token_latency_ms / 1000.0
        self.needs_async = bool(self.latency or self.token_latency)
        self.stats = Stats()
        self.log = log

    def handle_chat(self, req: dict, body_len: int):
        st = self.stats
        st.requests += 1
        stream = bool(req.get("stream"))
        opts = req.get("stream_options") or {}
        include_usage = bool(stream and opts.get("include_usage"))
        if stream:
            st.stream += 1
        else:
            st.nonstream += 1
        if include_usage:
            st.include_usage += 1
        scenario, turn, ok = plan_turn(req, self.default_scenario)
        final_tool = "final_answer" in _tool_names(req)
        if turn >= len(SCENARIOS[scenario]):
            st.final += 1
            if not ok:
                st.final_bad += 1
        if self.log:
            print(
                f"[fake_llm] stream={stream} scenario={scenario} turn={turn} ok={ok} "
                f"msgs={[m.get('role') for m in req.get('messages') or []]}",
                file=sys.stderr,
                flush=True,
            )
            if self.log == 2:
                print(json.dumps(req, indent=1)[:6000], file=sys.stderr, flush=True)
        model = str(req.get("model", "fake"))
        prompt_tokens = max(1, body_len // 4)
        payload = self.script.build(
            scenario, turn, ok, stream, include_usage, model, final_tool, prompt_tokens
        )
        return payload, stream


async def serve(args):
    server = FakeServer(
        args.scenario, args.final_tokens, args.latency_ms, args.token_latency_ms, args.log
    )
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(
        lambda: HTTPProtocol(server), args.host, args.port, backlog=1024, reuse_address=True
    )
    port = srv.sockets[0].getsockname()[1]
    msg = (
        f"fake_llm listening on http://{args.host}:{port}/v1 "
        f"scenario={args.scenario} final_tokens={args.final_tokens}"
    )
    print(msg, file=sys.stderr, flush=True)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:  # noqa: ASYNC230 (once, at startup)
            f.write(str(port))
        os.replace(tmp, args.port_file)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except NotImplementedError:
            pass
    async with srv:
        await stop.wait()


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765, help="0 = pick a free port (see --port-file)")
    p.add_argument("--port-file", default=None, help="write the bound port here once listening")
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default="sequential")
    p.add_argument("--final-tokens", type=int, default=200)
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--token-latency-ms", type=float, default=0.0)
    p.add_argument(
        "--log", type=int, default=0, help="1: one line per request, 2: also dump requests"
    )
    args = p.parse_args(argv)
    if args.final_tokens < 1:
        p.error("--final-tokens must be >= 1")
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()

"""A web chat that survives dropped connections: runs stream as Server-Sent Events whose
``id`` is the event's ``seq``, and a client that reconnects with ``Last-Event-ID`` (as every
``EventSource`` does) resumes exactly where it stopped — no gap, no duplicate.

    pip install 'treadle[web]'
    python examples/web/app.py            # then open http://127.0.0.1:8000

POST /runs {"prompt": "..."} starts a run and answers {"id": ...}; GET /runs/{id}/events
streams its events (from the start, or after ``Last-Event-ID`` / ``?after=N``); GET / is a
page that renders the streaming answer, tool calls and results.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
from anyio.abc import TaskGroup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from treadle import AgentContext, AgentEvent, AgentLoopConfig, agent_loop
from treadle.providers import Provider, get_provider
from treadle.streaming import EventLog, EventLogGap, last_event_id, sse_frame
from treadle.testing import ScriptedProvider, ScriptItem
from treadle.tools import tool


def model_or_script(script: Sequence[ScriptItem]) -> Provider:
    """The model named by ``TREADLE_MODEL``; without one, a ScriptedProvider playing
    ``script`` (what a real model would plausibly answer), announced as offline: the
    example runs as it is, with no key and no network."""
    spec = os.environ.get("TREADLE_MODEL")
    if spec:
        return get_provider(spec)
    print("(offline: scripted model answers; set TREADLE_MODEL to use a real one)")
    return ScriptedProvider(script, name="offline", model="offline-script", delay=0.002)


PAGE = (Path(__file__).with_name("page.html")).read_text(encoding="utf-8")


@tool(category="info")
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny and 21 °C in {city}."


def make_provider() -> object:
    delay = float(os.environ.get("WEB_EXAMPLE_DELAY", "0.02"))
    from treadle import AssistantMessage, ToolCall

    script = [
        AssistantMessage(content=[ToolCall(id="w1", name="weather", arguments={"city": "Porto"})]),
        "It is sunny and 21 °C in Porto today: " + "a fine day for a walk by the river. " * 6,
    ]
    provider = model_or_script(script)
    if hasattr(provider, "delay"):
        provider.delay = delay  # paced, so a dropped connection lands mid-answer
        provider.chunks = 40
    return provider


class Runs:
    """The runs of this server, each with its event log; runs live in the app's task group."""

    def __init__(self) -> None:
        self.logs: dict[str, EventLog] = {}
        self.tg: TaskGroup | None = None

    def start(self, prompt: str) -> str:
        run_id = uuid.uuid4().hex[:12]
        log = self.logs[run_id] = EventLog()
        assert self.tg is not None
        self.tg.start_soon(self._run, prompt, log)
        return run_id

    async def _run(self, prompt: str, log: EventLog) -> None:
        send, receive = anyio.create_memory_object_stream[AgentEvent](256)
        config = AgentLoopConfig(provider=make_provider())  # type: ignore[arg-type]
        async with anyio.create_task_group() as tg:
            tg.start_soon(log.pump, receive)
            async with send:
                await agent_loop(prompt, AgentContext(tools=[weather]), config, send)


def create_app() -> Starlette:
    runs = Runs()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            runs.tg = tg
            yield
            tg.cancel_scope.cancel()

    async def index(request: Request) -> Response:
        return HTMLResponse(PAGE)

    async def start(request: Request) -> Response:
        body = await request.json()
        return JSONResponse({"id": runs.start(str(body.get("prompt", "")))})

    async def events(request: Request) -> Response:
        log = runs.logs.get(request.path_params["run_id"])
        if log is None:
            return JSONResponse({"error": "no such run"}, status_code=404)
        after = last_event_id(request.headers.get("last-event-id"))
        if after is None:
            after = last_event_id(request.query_params.get("after"))

        drop_after = int(os.environ.get("WEB_EXAMPLE_DROP_AFTER", "0")) if after is None else 0

        async def frames() -> AsyncIterator[bytes]:
            yield b"retry: 250\n\n"  # reconnect quickly after a dropped connection
            sent = 0
            try:
                async for event in log.subscribe(after_seq=after):
                    yield sse_frame(event)
                    sent += 1
                    if drop_after and sent >= drop_after:
                        return  # (a demo of a dropped connection: the browser resumes)
            except EventLogGap as gap:
                yield f"event: gap\ndata: {gap}\n\n".encode()
            yield b"event: done\ndata: {}\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/", index),
            Route("/runs", start, methods=["POST"]),
            Route("/runs/{run_id}/events", events),
        ],
        lifespan=lifespan,
    )


app = create_app()

if __name__ == "__main__":
    import uvicorn

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")

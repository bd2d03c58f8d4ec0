"""The Starlette app behind ``web_app(agent)`` / ``treadle ui`` (extra ``web``)."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from ...agent import Agent
from ...errors import MissingExtra, install_hint
from ...sessions import MemoryStore, SessionError, SessionNotFound, SessionStore
from ...streaming import EventLogGap, last_event_id
from ...types import AgentEnd, AgentEvent, AgentMessage, CustomEvent
from .._guard import DEFAULT_MAX_BODY_BYTES, load_json
from .._mask import MASKED_HEADER, Secrets
from .._runs import EventEncoder, LiveRun, RequestError, Translator, UIRuns
from ..vercel_ai import (
    UI_MESSAGE_STREAM_HEADERS,
    find_run,
    messages_from_ui,
    start_run,
    stream_run,
)
from ._guard import Guard
from ._history import messages_to_ui, plain_title
from ._masked import InspectorEncoder, MaskedTranslator
from ._requests import REQUEST_EVENT, RequestView

STATIC = Path(__file__).with_name("static")
ASSETS = {
    "app.js": "text/javascript",
    "inspector.js": "text/javascript",
    "files.js": "text/javascript",
    "app.css": "text/css",
}
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class AskingTranslator:
    """The chat's frames, with each approval request preceded by the ``Ask``'s question (a
    transient ``data-approval-prompt`` part: any UI message stream client may ignore it),
    and without the inspector's request events."""

    def __init__(self, inner: Translator, agent: Agent[Any]) -> None:
        self.inner = inner
        self.agent = agent

    def translate(self, event: AgentEvent) -> list[dict[str, Any] | str]:
        if isinstance(event, CustomEvent) and event.name == REQUEST_EVENT:
            return []  # for the inspector only: a whole request per turn is no chat frame
        frames = self.inner.translate(event)
        if not isinstance(event, AgentEnd) or event.reason != "suspended":
            return frames
        out: list[dict[str, Any] | str] = []
        for frame in frames:
            if isinstance(frame, dict) and frame.get("type") == "tool-approval-request":
                call_id = str(frame.get("toolCallId"))
                asked = self.agent.context.suspended.get(call_id)
                if asked is not None and asked.prompt:
                    data = {"toolCallId": call_id, "prompt": asked.prompt}
                    out.append(
                        {
                            "type": "data-approval-prompt",
                            "id": call_id,
                            "data": data,
                            "transient": True,
                        }
                    )
            out.append(frame)
        return out

    def failure(self, message: str) -> list[dict[str, Any] | str]:
        return self.inner.failure(message)


class WebRuns(UIRuns):
    """The web app's runs: their frames masked once at their source (a secret a model
    streams in two deltas too), their events encoded once for the inspector; every reader
    shares those bytes."""

    def __init__(self, open_session: Any) -> None:
        super().__init__(open_session, history="server", encode_events=self._encoder)
        self.secrets = Secrets(())  # the guard's, set when it is made
        self.run_hooks = [RequestView()]  # each model request, for the inspector

    def _encoder(self) -> EventEncoder:
        return InspectorEncoder(self.secrets)

    def start(
        self,
        agent: Agent[Any],
        prompt: Sequence[AgentMessage],
        translator: Translator,
        *,
        thread_id: str,
        run_id: str | None = None,
    ) -> LiveRun:
        translator = AskingTranslator(translator, agent)
        if self.secrets:
            translator = MaskedTranslator(translator, self.secrets)
        return super().start(agent, prompt, translator, thread_id=thread_id, run_id=run_id)


class WebState:
    """The conversations the page talks to: one agent per session (the template's own
    session is served by the template itself), every run kept with its raw events."""

    def __init__(self, agent: Agent[Any], store: SessionStore | None, title: str) -> None:
        self.template = agent
        self.store: SessionStore = store or agent.store or MemoryStore()
        self.title = title
        self.runs = WebRuns(self._open)
        self.prompts: dict[str, tuple[int, list[AgentMessage]]] = {}

    def _open(self, session_id: str) -> Agent[Any]:
        template = self.template
        if template.store is self.store and template.session_id == session_id:
            return template
        return template.fork(session_id, store=self.store)

    def opened(self, session_id: str) -> Agent[Any] | None:
        return self.runs.opened(session_id)

    def active(self, session_id: str) -> LiveRun | None:
        live = self.runs.latest(session_id)
        return live if live is not None and not live.done.is_set() else None

    def history(
        self, session_id: str
    ) -> tuple[list[AgentMessage], dict[str, str | None], LiveRun | None]:
        """The session's messages (those of a run in flight left out, its prompt kept: the
        page replays the run's stream for the rest), its calls waiting for approval (with
        the ``Ask``'s question when it is known), and the run in flight."""
        agent = self.opened(session_id)
        live = self.active(session_id)
        if agent is None:
            loaded = self.store.load(session_id)
            return list(loaded.messages), dict.fromkeys(loaded.pending_tool_calls), None
        if live is not None and live.run_id in self.prompts:
            start, prompt = self.prompts[live.run_id]
            return [*agent.messages[:start], *prompt], {}, live
        suspended = agent.context.suspended
        pending = {
            c: (suspended[c].prompt if c in suspended else None)
            for c in agent.context.pending_tool_calls
        }
        return list(agent.messages), pending, None


def build_web_app(
    agent: Agent[Any],
    *,
    store: SessionStore | None = None,
    title: str | None = None,
    **guard_options: Any,
) -> Any:
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtra(f"the treadle web app needs Starlette: {install_hint('web')}") from exc

    def _json(data: Any, status: int = 200) -> Response:
        return JSONResponse(data, status_code=status, headers={"cache-control": "no-store"})

    def _error(message: str, status: int) -> Response:
        return _json({"error": message}, status)

    state = WebState(agent, store, title or agent.name)
    runs = state.runs
    sse_headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
    masked = {MASKED_HEADER.decode(): "1"}  # a run's frames: masked at their source
    page_headers = {
        "cache-control": "no-cache",
        "content-security-policy": (
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        ),
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
    }

    def session_id(request: Request) -> str | None:
        value = str(request.path_params.get("sid", ""))
        return value if _ID.fullmatch(value) else None

    async def read_json(request: Request) -> Any:
        try:
            return load_json(await request.body())
        except ValueError as exc:
            raise RequestError(str(exc)) from None

    async def page(request: Request) -> Response:
        html = (STATIC / "index.html").read_bytes()
        return Response(html, media_type="text/html; charset=utf-8", headers=page_headers)

    async def asset(request: Request) -> Response:
        name = str(request.path_params["name"])
        if name not in ASSETS:
            return Response(status_code=404)
        return Response(
            (STATIC / name).read_bytes(),
            media_type=f"{ASSETS[name]}; charset=utf-8",
            headers={"cache-control": "no-cache", "x-content-type-options": "nosniff"},
        )

    async def info(request: Request) -> Response:
        provider = state.template.provider
        label = f"{getattr(provider, 'name', '')}:{getattr(provider, 'model', '')}".strip(":")
        limit = guard_options.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES)
        return _json(
            {"title": state.title, "model": label, "sessions": True, "max_body_bytes": limit}
        )

    async def chat(request: Request) -> Response:
        try:
            body = await read_json(request)
            chat_id = body.get("id") if isinstance(body, dict) else None
            if not isinstance(chat_id, str) or not _ID.fullmatch(chat_id):
                raise RequestError("the chat id must be 1-128 letters, digits, '.', '_' or '-'")
            thread = runs.agent_for(chat_id)
            start = len(thread.messages)
            live = start_run(runs, body)
        except RequestError as exc:
            return _error(str(exc), exc.status)
        except SessionError as exc:
            return _error(str(exc), 409)
        last = body["messages"][-1] if body["messages"] else {}
        prompt: list[AgentMessage] = []
        if isinstance(last, dict) and last.get("role") == "user":
            prompt = messages_from_ui([last])[0]  # read (files too) by start_run already
        state.prompts[live.run_id] = (start, list(prompt))
        for gone in [r for r in state.prompts if r not in runs.runs]:  # runs forgotten
            del state.prompts[gone]
        return StreamingResponse(
            stream_run(live, request.headers.get("last-event-id")),
            media_type="text/event-stream",
            headers={
                **sse_headers,
                **UI_MESSAGE_STREAM_HEADERS,
                **masked,
                "x-treadle-run-id": live.run_id,
            },
        )

    async def resume(request: Request) -> Response:
        sid = session_id(request)
        cursor = request.headers.get("last-event-id") or request.query_params.get("after")
        live = find_run(runs, sid, last_event_id=cursor) if sid else None
        if live is None:
            return Response(status_code=204)
        return StreamingResponse(
            stream_run(live, cursor),
            media_type="text/event-stream",
            headers={
                **sse_headers,
                **UI_MESSAGE_STREAM_HEADERS,
                **masked,
                "x-treadle-run-id": live.run_id,
            },
        )

    async def steer(request: Request) -> Response:
        sid = session_id(request)
        agent = state.opened(sid) if sid else None
        try:
            body = await read_json(request)
        except RequestError as exc:
            return _error(str(exc), exc.status)
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text.strip():
            return _error("expected {text: '...'}", 422)
        if agent is None or not agent.running:
            return _error("nothing is running in this chat: send the message instead", 409)
        agent.steer(text)
        return _json({"steered": True})

    async def stop(request: Request) -> Response:
        sid = session_id(request)
        agent = state.opened(sid) if sid else None
        if agent is None or not agent.running:
            return _json({"stopped": False})
        agent.abort()
        return _json({"stopped": True})

    async def thread_runs(request: Request) -> Response:
        sid = session_id(request)
        found = [
            {"id": live.run_id, "done": live.done.is_set()}
            for live in runs.runs.values()
            if live.thread_id == sid
        ]
        return _json({"runs": found})

    async def events(request: Request) -> Response:
        live = runs.get(str(request.path_params["run_id"]))
        if live is None or live.encoded is None:
            return _error("no such run", 404)
        log = live.encoded
        # a cursor that is no seq (``"²"``, a thousand digits) starts from the beginning
        after = last_event_id(
            request.headers.get("last-event-id") or request.query_params.get("after")
        )

        async def body() -> AsyncIterator[bytes]:
            try:
                async for item in log.subscribe(after):
                    yield item.data  # encoded once, shared by every reader
            except EventLogGap as gap:
                yield f"event: gap\ndata: {json.dumps(str(gap))}\n\n".encode()
            yield b"event: end\ndata: {}\n\n"

        return StreamingResponse(
            body(), media_type="text/event-stream", headers={**sse_headers, **masked}
        )

    async def sessions(request: Request) -> Response:
        infos = [i for i in state.store.list(limit=200) if i.message_count > 0]
        return _json(
            {
                "sessions": [
                    {
                        "id": i.id,
                        "title": plain_title(i.title, branch=i.parent_id is not None),
                        "updated_at": i.updated_at,
                        "messages": i.message_count,
                        "parent_id": i.parent_id,
                        "running": state.active(i.id) is not None,
                    }
                    for i in infos
                ]
            }
        )

    async def session(request: Request) -> Response:
        sid = session_id(request)
        if sid is None:
            return _error("invalid session id", 400)
        try:
            messages, pending, live = state.history(sid)
        except SessionNotFound:
            return _error(f"no session {sid!r}", 404)
        return _json(
            {
                "id": sid,
                "messages": messages_to_ui(messages, pending),
                "running": live.run_id if live is not None else None,
            }
        )

    async def branch(request: Request) -> Response:
        sid = session_id(request)
        try:
            body = await read_json(request)
        except RequestError as exc:
            return _error(str(exc), exc.status)
        at = body.get("at") if isinstance(body, dict) else None
        if sid is None or not isinstance(at, int) or isinstance(at, bool) or at < 0:
            return _error("expected {at: <number of messages to keep>}", 422)
        try:
            agent = runs.agent_for(sid)
            if agent.running:
                return _error("this chat is running: stop it or wait, then branch", 409)
            new = agent.branch(at)
        except (SessionError, IndexError) as exc:
            return _error(str(exc), 409)
        runs.adopt(new.session_id, new)
        return _json({"id": new.session_id})

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with runs.serving():
            yield

    app = Starlette(
        routes=[
            Route("/", page),
            Route("/static/{name}", asset),
            Route("/api/info", info),
            Route("/api/chat", chat, methods=["POST"]),
            Route("/api/chat/{sid}/stream", resume),
            Route("/api/chat/{sid}/steer", steer, methods=["POST"]),
            Route("/api/chat/{sid}/stop", stop, methods=["POST"]),
            Route("/api/chat/{sid}/runs", thread_runs),
            Route("/api/runs/{run_id}/events", events),
            Route("/api/sessions", sessions),
            Route("/api/sessions/{sid}", session),
            Route("/api/sessions/{sid}/branch", branch, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    app.state.web = state
    guard = Guard(app, **guard_options)
    guard.state = app.state
    runs.secrets = guard.mask
    return guard

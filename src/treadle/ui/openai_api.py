"""An OpenAI-compatible endpoint for treadle agents: the official ``openai`` SDK — or any
OpenAI client, IDE plug-in or proxy — talks to an agent as if it were a model.

``openai_app(agent)`` is an ASGI app (Starlette, extra ``web``) serving, under ``/v1``:

- ``POST /v1/chat/completions`` — Chat Completions, streamed (``stream: true``) or not;
- ``POST /v1/responses`` — the Responses API, streamed or not;
- ``GET /v1/models`` and ``GET /v1/models/{id}`` — the agents, by name (a request's
  ``model`` picks one; with a single agent any name reaches it).

Each request runs on a fresh branch of the agent (same model, tools, hooks, settings) holding
the conversation the client sent. The agent's own tools run on the server (in the Responses
API each is an ``mcp_call`` item); the client's function tools become external tools: the run
stops on their calls and returns them as tool calls for the client to answer. A call the
agent's hooks ask a person about becomes an ``mcp_approval_request`` item (Responses); over
Chat Completions, which has no way to ask, it is denied and the model is told why. A client
that goes away (a closed stream, a dropped connection) aborts the run: every call it started
gets its result. Usage is reported. See docs/serve.md.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..agent import Agent, AgentSnapshot, RunResult
from ..errors import MissingExtra, UsageError, install_hint
from ..tools import Tool, traits_of
from ..types import AgentEvent, AgentMessage, ContinuationKind, Usage, UserMessage
from ._asgi_io import read_json, send_json, stream_sse, while_connected
from ._drive import OnEvent, drive
from ._gate import Decision, admit_client_history, apply_decisions
from ._guard import DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY_BYTES, HTTPGuard, Receive, Scope, Send
from ._openai_chat import ChatTranslator, sse_data
from ._openai_input import (
    ApprovalRecord,
    ResponsesInput,
    bad,
    chat_tools,
    messages_from_chat,
    model_settings,
    responses_tools,
)
from ._openai_responses import ResponsesTranslator, sse_event
from ._runs import RequestError, add_external_tools

__all__ = ["OpenAIEndpoint", "agents_by_name", "openai_app"]

CHAT_DENIAL = (
    "Not run: this call needs a person's approval, and the Chat Completions API has no way "
    "to ask for it (the Responses API does)."
)
MAX_ROUNDS = 16


def agents_by_name(agents: Any) -> dict[str, Agent[Any]]:
    """An agent, a list of agents or a ``{name: agent}`` mapping, as ``{name: agent}``
    (names unique)."""
    if isinstance(agents, Agent):
        return {agents.name: agents}
    if isinstance(agents, Mapping):
        found = dict(agents)
    else:
        found = {}
        for agent in agents:
            if not isinstance(agent, Agent):
                raise UsageError(
                    f"serve Agents (or a mapping of names to Agents), got {type(agent).__name__}"
                )
            if agent.name in found:
                raise UsageError(
                    f"two agents are named {agent.name!r}: give each its own name "
                    "(Agent(..., name=...)), the name clients ask for"
                )
            found[agent.name] = agent
    if not found:
        raise UsageError("serve at least one agent: openai_app(agent) or openai_app([a, b])")
    return found


def _error_body(exc: RequestError) -> dict[str, Any]:
    kind = "server_error" if exc.status >= 500 else "invalid_request_error"
    codes = {404: "model_not_found", 409: "conflict", 413: "request_too_large"}
    return {
        "error": {"message": str(exc), "type": kind, "param": None, "code": codes.get(exc.status)}
    }


def _total(results: Sequence[RunResult[Any]]) -> Usage:
    total = Usage()
    for result in results:
        total = total + result.usage
    return total


class OpenAIEndpoint:
    """The OpenAI API over ``agents`` (``{name: template}``), for any ASGI framework: its
    :meth:`chat` and :meth:`responses` are ASGI apps for one request each (mount them behind
    :class:`~treadle.ui._guard.HTTPGuard`, as :func:`openai_app` does). Approval requests it
    made wait, at most ``max_approvals`` of them, for a response naming them."""

    def __init__(self, agents: Any, *, max_approvals: int = 1000) -> None:
        self.agents = agents_by_name(agents)
        self.max_approvals = max_approvals
        self.approvals: OrderedDict[str, ApprovalRecord] = OrderedDict()

    # ---- shared ----

    def template(self, body: Mapping[str, Any]) -> Agent[Any]:
        model = body.get("model")
        agent = self.agents.get(model) if isinstance(model, str) else None
        if agent is None and len(self.agents) == 1:
            agent = next(iter(self.agents.values()))
        if agent is None:
            names = ", ".join(sorted(self.agents))
            raise RequestError(f"no agent is named {model!r}: ask for one of {names}", 404)
        return agent

    def prepare(
        self,
        template: Agent[Any],
        history: list[AgentMessage],
        system: str,
        tools: Sequence[Any],
        waiting: Mapping[str, Any] = {},
        decisions: Mapping[str, Decision] = {},
    ) -> tuple[Agent[Any], list[AgentMessage], frozenset[str]]:
        """A branch of ``template`` holding the client's history, admitted by the gate (a
        client's history is data: ui/_gate.py); its prompt, and the names of the tools whose
        calls go back to the client."""
        agent = template.branch(0)
        if system:
            base = agent.context.resolve_system_prompt()
            agent.context.system_prompt = f"{base}\n\n{system}" if base else system
        agent.context.continuation_kind = ContinuationKind.INITIAL
        agent.context.parent_loop_id = None
        prompt: list[AgentMessage] = []
        if history and isinstance(history[-1], UserMessage):
            history, prompt = history[:-1], [history[-1]]
        if not prompt and not history:
            raise bad("the request holds no message to answer")
        agent.restore(AgentSnapshot(messages=history))
        admit_client_history(agent.context, waiting, decisions)
        apply_decisions(agent.context, dict(decisions))
        try:
            add_external_tools(agent, tools)
        except ValueError as exc:
            raise bad(str(exc), 422) from None
        external = frozenset(
            t.name for t in agent.context.tools if isinstance(t, Tool) and traits_of(t).external
        )
        return agent, prompt, external

    async def rounds(
        self,
        agent: Agent[Any],
        prompt: list[AgentMessage],
        on_event: OnEvent,
        settings: Any,
        *,
        deny: str | None,
    ) -> list[RunResult[Any]]:
        """Run until the answer: with ``deny``, calls waiting for an approval are denied with
        that reason and the run goes on (Chat Completions)."""
        results: list[RunResult[Any]] = []
        while True:
            result = await drive(agent, prompt, on_event, model_settings=settings)
            results.append(result)
            context = agent.context
            asks = [c for c in context.waiting_tool_calls if not context.suspended[c].external]
            if result.reason != "suspended" or deny is None or not asks:
                return results
            if len(results) >= MAX_ROUNDS:
                return results
            for call_id in asks:
                context.deny(call_id, deny)
            prompt = []

    async def _answer(self, receive: Receive, send: Send, handle: Any) -> None:
        try:
            body = await read_json(receive)
            if not isinstance(body, dict):
                raise bad("the request body must be a JSON object")
            await handle(body, receive, send)
        except RequestError as exc:
            await send_json(send, exc.status, _error_body(exc))
        except ConnectionError:
            return
        except ValueError as exc:  # not JSON, too deep
            await send_json(send, 400, _error_body(RequestError(str(exc))))

    # ---- Chat Completions ----

    async def chat(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._answer(receive, send, self._chat)

    async def _chat(self, body: dict[str, Any], receive: Receive, send: Send) -> None:
        template = self.template(body)
        if body.get("n") not in (None, 1):
            raise bad("n must be 1: an agent gives one answer")
        history, system = messages_from_chat(body.get("messages"))
        settings = model_settings(body, max_tokens=("max_tokens", "max_completion_tokens"))
        agent, prompt, external = self.prepare(
            template, history, system, chat_tools(body.get("tools"))
        )
        translator = ChatTranslator(template.name, external)
        options = body.get("stream_options") or {}
        include_usage = bool(isinstance(options, dict) and options.get("include_usage"))

        if body.get("stream"):

            async def work(emit: Any) -> None:
                async def on_event(event: AgentEvent) -> None:
                    if event.depth == 0:
                        for frame in translator.translate(event):
                            await emit(sse_data(frame))

                results = await self.rounds(agent, prompt, on_event, settings, deny=CHAT_DENIAL)
                last = results[-1]
                if last.reason == "error":
                    message = last.error.message if last.error else "the run failed"
                    frames = translator.failure(message)
                else:
                    frames = translator.finish(last, _total(results), include_usage)
                for frame in [*frames, "[DONE]"]:
                    await emit(sse_data(frame))

            await stream_sse(receive, send, work)
            return

        async def on_event(event: AgentEvent) -> None:
            if event.depth == 0:
                translator.translate(event)

        outcome: list[RunResult[Any]] = []

        async def run() -> None:
            outcome.extend(await self.rounds(agent, prompt, on_event, settings, deny=CHAT_DENIAL))

        if not await while_connected(receive, run):
            return
        last = outcome[-1]
        if last.reason == "error":
            message = last.error.message if last.error else "the run failed"
            await send_json(send, 500, _error_body(RequestError(message, 500)))
            return
        await send_json(send, 200, translator.completion(last, _total(outcome)))

    # ---- Responses ----

    async def responses(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._answer(receive, send, self._responses)

    async def _responses(self, body: dict[str, Any], receive: Receive, send: Send) -> None:
        template = self.template(body)
        for name in ("previous_response_id", "conversation"):
            if body.get(name):
                raise bad(
                    f"{name} is not supported: this server keeps no responses; send the "
                    "whole conversation as input (the output items of earlier responses "
                    "included)"
                )
        if body.get("background"):
            raise bad("background responses are not supported")
        read = ResponsesInput(self.approvals).read(body.get("input"))
        instructions = body.get("instructions")
        system = "\n\n".join(
            s for s in [instructions if isinstance(instructions, str) else "", *read.system] if s
        )
        settings = model_settings(body, max_tokens=("max_output_tokens",))
        agent, prompt, external = self.prepare(
            template,
            read.history,
            system,
            responses_tools(body.get("tools")),
            read.waiting,
            read.decisions,
        )
        translator = ResponsesTranslator(template.name, template.name, external)
        for request_id in read.used:  # each decision is taken once
            record = self.approvals.pop(request_id, None)
            if record is not None:
                translator.approved[record[0]] = request_id

        async def run(emit: Any) -> dict[str, Any]:
            async def on_event(event: AgentEvent) -> None:
                if event.depth == 0:
                    for frame in translator.translate(event):
                        await emit(frame)

            results = await self.rounds(agent, prompt, on_event, settings, deny=None)
            last = results[-1]
            if last.reason == "suspended":
                context = agent.context
                for call_id in context.waiting_tool_calls:
                    record = context.suspended[call_id]
                    if record.external:
                        continue
                    translator.out = []
                    request_id = translator.ask(call_id, record.name, record.arguments)
                    self._remember(request_id, (call_id, record))
                    for frame in translator.out:
                        await emit(frame)
            return translator.final(last, _total(results))

        if body.get("stream"):

            async def work(write: Any) -> None:
                async def emit(frame: Any) -> None:
                    await write(sse_event(frame))

                for frame in translator.opening():
                    await emit(frame)
                response = await run(emit)
                for frame in translator.closing(response):
                    await emit(frame)

            await stream_sse(receive, send, work)
            return

        async def ignore(frame: Any) -> None:
            return None

        outcome: list[dict[str, Any]] = []

        async def whole() -> None:
            outcome.append(await run(ignore))

        if not await while_connected(receive, whole):
            return
        response = outcome[0]
        if response["status"] == "failed":
            error = RequestError(response["error"]["message"], 500)
            await send_json(send, 500, _error_body(error))
            return
        await send_json(send, 200, response)

    def _remember(self, request_id: str, record: ApprovalRecord) -> None:
        self.approvals[request_id] = record
        while len(self.approvals) > self.max_approvals:
            self.approvals.popitem(last=False)

    # ---- models ----

    def model_entry(self, name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": int(time.time()), "owned_by": "treadle"}

    async def models(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        name = path.rstrip("/").rpartition("/models")[2].lstrip("/")
        if name:
            if name not in self.agents:
                error = RequestError(f"no agent is named {name!r}", 404)
                await send_json(send, 404, _error_body(error))
                return
            await send_json(send, 200, self.model_entry(name))
            return
        data = [self.model_entry(n) for n in self.agents]
        await send_json(send, 200, {"object": "list", "data": data})


def openai_routes(
    endpoint: OpenAIEndpoint, guard: Mapping[str, Any], prefix: str = "/v1"
) -> list[Any]:
    """The Starlette routes of the OpenAI API under ``prefix``, each behind the guard."""
    from starlette.routing import Route

    def guarded(app: Any) -> HTTPGuard:
        return HTTPGuard(app, **guard)

    return [
        Route(f"{prefix}/chat/completions", guarded(endpoint.chat), methods=["POST"]),
        Route(f"{prefix}/responses", guarded(endpoint.responses), methods=["POST"]),
        Route(f"{prefix}/models", guarded(endpoint.models), methods=["GET"]),
        Route(f"{prefix}/models/{{name:path}}", guarded(endpoint.models), methods=["GET"]),
    ]


def openai_app(
    agent: Any,
    *,
    token: str | None = None,
    origins: Iterable[str] = (),
    trusted_hosts: Iterable[str] = (),
    allow_remote: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
) -> Any:
    """An ASGI app (Starlette) serving ``agent`` — an :class:`~treadle.Agent`, a list of
    them, or ``{name: agent}`` — as the OpenAI API under ``/v1`` (point a client's
    ``base_url`` at ``http://host:port/v1``).

    Guarded as every treadle HTTP surface is (docs/security.md): ``token`` is asked of every
    request as ``Authorization: Bearer <token>`` — the OpenAI SDK's ``api_key`` — and
    without one only loopback peers asking for a loopback name are served; a POST with a
    foreign or ``null`` ``Origin`` (not in ``origins``), or with none and not
    ``application/json``, is refused; bodies are at most ``max_body_bytes``, read within
    ``body_timeout`` seconds."""
    try:
        from starlette.applications import Starlette
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtra(f"openai_app needs Starlette: {install_hint('web')}") from exc
    endpoint = OpenAIEndpoint(agent)
    guard = {
        "token": token,
        "origins": origins,
        "trusted_hosts": trusted_hosts,
        "allow_remote": allow_remote,
        "max_body_bytes": max_body_bytes,
        "body_timeout": body_timeout,
    }
    app = Starlette(routes=openai_routes(endpoint, guard))
    app.state.openai = endpoint
    return app

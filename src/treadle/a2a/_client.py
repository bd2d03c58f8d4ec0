"""``A2AAgent(url)``: a remote A2A agent as a treadle tool (a toolset of one, named from
its card), over the a2a-sdk client.

A call runs a child loop nested under the caller's (its own ``loop_id``, ``depth`` + 1,
the caller's event stream and cancel token), whose one "model answer" is the remote
task: its text arrives as that answer's deltas, so the remote agent shows in the event
tree as a sub-agent does. When the remote task asks for an approval, the caller's
``approval_handler`` decides; without one the call asks the caller's person
(:class:`~treadle.tools.ApprovalRequired`: the calling run suspends on the call, and once it
is approved the call is made again and answers the remote task, which then goes on). A
question ends the call with the question, and the model answers it by calling again with
``task_id``. A cancelled call cancels the remote task.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
from a2a.client import A2ACardResolver, A2AClientError, Client, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)

from ..cancellation import CancellationToken
from ..errors import ConfigurationError, TreadleError
from ..loop import AgentContext, AgentLoopConfig, Allow, Ask, Deny, agent_loop
from ..providers import ModelRequest, StreamDone, StreamEvent, StreamStart, TextEnd, TextStart
from ..tools import ApprovalRequired, ToolCategory, ToolContext, ToolTraits
from ..types import AssistantMessage, TextContent, TextDelta, ToolCall, ToolResult, UserMessage
from ._parts import data_of, data_part

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "What to ask the agent, in full."},
        "task_id": {
            "type": "string",
            "description": "To answer a question the agent asked: the task_id it gave.",
        },
    },
    "required": ["task"],
    "additionalProperties": False,
}
TERMINAL = {
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_REJECTED: "rejected",
}


class A2AError(TreadleError):
    """A remote A2A agent could not be reached or used (its card, its address, a call)."""


def tool_name(name: str) -> str:
    """A card's name as a tool name (letters, digits, ``_`` and ``-``)."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:64]
    return cleaned or "remote_agent"


class A2AAgent:
    """A remote A2A agent, usable in ``tools=``: a toolset offering one tool, named and
    described from the agent's card (fetched once, on the first run), or
    :meth:`as_tool` for a tool named here (the card is then fetched on its first call).

    ``token``: sent as ``Authorization: Bearer``; ``auth``: any ``httpx.Auth`` (a credential
    hook: it signs each request); ``headers``: more headers; ``client``: an
    ``httpx.AsyncClient`` of yours (used as it is: put the credentials on it). Credentials
    go only to ``url``'s origin: a card whose address is elsewhere is refused.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        description: str | None = None,
        token: str | None = None,
        auth: httpx.Auth | None = None,
        headers: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float = 600.0,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigurationError(f"A2AAgent needs an http(s) URL, not {url!r}")
        if client is not None and (token is not None or auth is not None or headers):
            raise ConfigurationError(
                "give A2AAgent either client= (with its own credentials) or token= / auth= "
                "/ headers=, not both"
            )
        self.url = url.rstrip("/")
        self.name = name
        self.description = description
        self.timeout = timeout
        self._token = token
        self._auth = auth
        self._headers = dict(headers or {})
        self._client = client
        self._own_client: httpx.AsyncClient | None = None
        self._card: AgentCard | None = None
        self._a2a: Client | None = None
        self._lock = anyio.Lock()
        self._tool: A2ATool | None = None
        self.contexts: dict[str, str] = {}
        """The remote context id of each calling conversation (by its session id)."""

    def __repr__(self) -> str:  # never the token
        return f"A2AAgent({self.url!r})"

    # ---- the toolset ----

    async def get_tools(self) -> list[A2ATool]:
        if self._tool is None:
            card = await self.card()
            self._tool = self.as_tool(
                self.name or tool_name(card.name),
                self.description or _card_description(card),
            )
        return [self._tool]

    def as_tool(self, name: str | None = None, description: str | None = None) -> A2ATool:
        """This remote agent as one tool taking ``{"task": str}`` (and ``task_id`` to
        answer a question it asked)."""
        return A2ATool(
            self,
            name or self.name or "remote_agent",
            description or self.description or f"Ask the remote agent at {self.url}.",
        )

    # ---- the connection ----

    def http(self) -> httpx.AsyncClient:
        if self._client is not None:
            return self._client
        if self._own_client is None:
            headers = dict(self._headers)
            if self._token is not None:
                headers["Authorization"] = f"Bearer {self._token}"
            self._own_client = httpx.AsyncClient(
                headers=headers,
                auth=self._auth,
                timeout=httpx.Timeout(self.timeout, connect=30.0),
                follow_redirects=False,
            )
        return self._own_client

    async def card(self) -> AgentCard:
        """The remote agent's card (fetched once)."""
        async with self._lock:
            if self._card is None:
                try:
                    card = await A2ACardResolver(self.http(), self.url).get_agent_card()
                except (A2AClientError, httpx.HTTPError) as exc:
                    raise A2AError(
                        f"could not read the agent card of {self.url}: {_short(exc)}"
                    ) from None
                _check_same_origin(self.url, card)
                self._card = card
            return self._card

    async def client(self) -> Client:
        card = await self.card()
        if self._a2a is None:
            self._a2a = ClientFactory(
                ClientConfig(streaming=True, httpx_client=self.http())
            ).create(card)
        return self._a2a

    async def aclose(self) -> None:
        client, self._own_client = self._own_client, None
        if client is not None:
            await client.aclose()

    async def __aenter__(self) -> A2AAgent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class A2ATool:
    """One call: a child loop whose model is the remote task (see the module docstring)."""

    traits = ToolTraits(category=ToolCategory.MCP)  # a network endpoint: 120 s by default

    def __init__(self, remote: A2AAgent, name: str, description: str) -> None:
        self.remote = remote
        self.name = name
        self.description = description
        self.parameters: dict[str, Any] = copy.deepcopy(PARAMETERS)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> ToolResult:
        task = arguments.get("task")
        if not isinstance(task, str) or not task.strip():
            return ToolResult.error(f"Tool '{self.name}' needs a non-empty 'task' string.")
        task_id = arguments.get("task_id")
        conversation = getattr(ctx.context, "session_id", "") or ""
        bridge = RemoteTask(self, ctx, conversation, task_id if isinstance(task_id, str) else None)
        if ctx.approved and isinstance(ctx.saved, dict) and ctx.saved.get("requests"):
            bridge.resume(ctx.saved)  # the person approved what the remote task asked
        child = AgentContext(
            loop_id=uuid.uuid4().hex,
            parent_loop_id=ctx.loop_id or None,
            parent_tool_call_id=ctx.tool_call_id,
            depth=ctx.depth + 1,
        )
        config = AgentLoopConfig(provider=bridge)
        await agent_loop(
            [UserMessage.of(task)], child, config, ctx.events, ctx.cancel, parent=ctx.run
        )
        details: dict[str, Any] = {
            "child_loop_id": child.loop_id,
            "task_id": bridge.task_id,
            "context_id": bridge.context_id,
            "state": bridge.state,
        }
        text = bridge.text()
        if bridge.error is not None:
            return ToolResult.error(bridge.error, details=details)
        if bridge.asking:  # no handler: the caller's run suspends on this call
            prompts = [str(r.get("prompt") or "") for r in bridge.asking]
            question = "\n".join(p for p in prompts if p) or "The agent asks to run a tool."
            raise ApprovalRequired(
                f"The agent '{self.name}' asks: {question}",
                saved={
                    "task_id": bridge.task_id,
                    "context_id": bridge.context_id,
                    "requests": bridge.asking,
                },
            )
        if bridge.state == "input-required":
            details["input_required"] = True
            question = bridge.question or text or "The agent needs more input."
            return ToolResult.of(
                f"{question}\n\n[The agent '{self.name}' asks this and waits: to answer, call "
                f"{self.name} again with the answer as task and task_id {bridge.task_id!r}.]",
                details=details,
            )
        if bridge.state != "completed":
            why = f": {text}" if text else ""
            return ToolResult.error(
                f"The agent '{self.name}' ended {bridge.state}{why}", details=details
            )
        return ToolResult.of(text, details=details)


class RemoteTask:
    """The "provider" of an A2A call's child loop: one answer, streamed from the remote
    task (each artifact a text block), with approvals asked of the caller on the way."""

    name = "a2a"

    def __init__(
        self, tool: A2ATool, ctx: ToolContext[Any], conversation: str, task_id: str | None
    ) -> None:
        self.tool = tool
        self.remote = tool.remote
        self.model = tool.remote.url
        self.ctx = ctx
        self.conversation = conversation
        self.task_id = task_id
        self.context_id: str | None = self.remote.contexts.get(conversation)
        self.state = "submitted"
        self.error: str | None = None
        self.question: str | None = None
        self.final_text = ""
        self.asking: list[dict[str, Any]] = []  # approvals to ask the caller's person
        self._approved: list[dict[str, Any]] = []  # approvals a person gave, to send first
        self._blocks: dict[str, int] = {}  # artifact id -> text block index
        self._shown: list[str] = []  # each block's text so far

    def resume(self, saved: dict[str, Any]) -> None:
        """Continue the remote task a person approved (``saved``: what the call asked with)."""
        self.task_id = str(saved.get("task_id") or self.task_id or "") or None
        self.context_id = str(saved.get("context_id") or self.context_id or "") or None
        requests = [r for r in saved.get("requests") or () if isinstance(r, dict)]
        self._approved = [
            {"tool_call_id": str(r.get("tool_call_id", "")), "approved": True} for r in requests
        ]

    def text(self) -> str:
        shown = "\n\n".join(t for t in self._shown if t)
        return shown or self.final_text

    async def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        prompt = next((m for m in reversed(request.messages) if isinstance(m, UserMessage)), None)
        yield StreamStart(model=self.model)
        first = [data_part(answer) for answer in self._approved]
        message: Message | None = self._message(first or [Part(text=prompt.text if prompt else "")])
        finished = False
        try:
            while message is not None:
                reply: Message | None = None
                async for event in self._send(message):
                    for out in self._take(event):
                        yield out
                    if self.state == "input-required":
                        reply = await self._answer(event)
                message = reply
            finished = True
        except A2AClientError as exc:
            self.error = f"The agent '{self.tool.name}' could not be called: {_short(exc)}"
        finally:
            if not finished and self.error is None and self.task_id is not None:
                await self._cancel_remote()
        for index, _ in enumerate(self._shown):
            yield TextEnd(index=index)
        blocks = [TextContent(text=t) for t in self._shown if t]
        yield StreamDone(message=AssistantMessage(content=blocks, model=self.model))

    async def _send(self, message: Message) -> AsyncIterator[StreamResponse]:
        client = await self.remote.client()
        async for event in client.send_message(SendMessageRequest(message=message)):
            yield event

    def _message(self, parts: list[Part]) -> Message:
        return Message(
            message_id=uuid.uuid4().hex,
            role=Role.ROLE_USER,
            parts=parts,
            task_id=self.task_id or "",
            context_id=self.context_id or "",
        )

    def _take(self, event: StreamResponse) -> list[StreamEvent]:
        """The stream events one remote event makes (text deltas), noting its state."""
        kind = event.WhichOneof("payload")
        out: list[StreamEvent] = []
        if kind == "task":
            self._ids(event.task.id, event.task.context_id)
            self._status(event.task.status)
            for artifact in event.task.artifacts:
                out += self._artifact(artifact, append=False)
        elif kind == "status_update":
            self._ids(event.status_update.task_id, event.status_update.context_id)
            self._status(event.status_update.status)
        elif kind == "artifact_update":
            update = event.artifact_update
            out += self._artifact(update.artifact, append=update.append)
        elif kind == "message":  # an answer with no task
            self.state = "completed"
            self.final_text = _text(event.message.parts)
        return out

    def _ids(self, task_id: str, context_id: str) -> None:
        self.task_id = task_id or self.task_id
        if context_id:
            self.context_id = context_id
            self.remote.contexts[self.conversation] = context_id

    def _status(self, status: Any) -> None:
        state = status.state
        self.state = (
            TERMINAL.get(state)
            or ("input-required" if state == TaskState.TASK_STATE_INPUT_REQUIRED else None)
            or ("auth-required" if state == TaskState.TASK_STATE_AUTH_REQUIRED else "working")
        )
        if status.HasField("message"):
            text = _text(status.message.parts)
            if self.state == "input-required":
                self.question = text
            elif text:
                self.final_text = text

    def _artifact(self, artifact: Any, *, append: bool) -> list[StreamEvent]:
        text = _text(artifact.parts)
        out: list[StreamEvent] = []
        index = self._blocks.get(artifact.artifact_id)
        if index is None:
            if not text:
                return out
            index = self._blocks[artifact.artifact_id] = len(self._shown)
            self._shown.append("")
            out.append(TextStart(index=index))
        shown = self._shown[index]
        if append:
            delta = text
        elif text.startswith(shown):  # the whole text again: only what is new
            delta = text[len(shown) :]
        else:  # replaced: shown as it is now (the deltas so far stay in the stream)
            self._shown[index] = ""
            delta = text
        if delta:
            self._shown[index] += delta
            out.append(TextDelta(index=index, text=delta))
        return out

    async def _answer(self, event: StreamResponse) -> Message | None:
        """The reply to an ``input-required`` remote task: each approval it asks for is
        decided by the caller's approval handler (none: denied); a question ends the call
        (the model answers it)."""
        status = _status_of(event)
        if status is None:
            return None
        requests = [
            d
            for p in status.message.parts
            if p.WhichOneof("content") == "data"
            and isinstance(d := data_of(p), dict)
            and d.get("type") == "approval"
        ]
        if not requests:
            return None
        if self._handler() is None:  # the caller's person decides: the call asks
            self.asking = requests
            return None
        parts = [data_part(await self._decide(r)) for r in requests]
        return self._message(parts)

    def _handler(self) -> Any:
        return getattr(getattr(self.ctx.run, "config", None), "approval_handler", None)

    async def _decide(self, request: dict[str, Any]) -> dict[str, Any]:
        call_id = str(request.get("tool_call_id", ""))
        run = self.ctx.run
        handler = self._handler()
        assert handler is not None
        arguments = request.get("arguments")
        call = ToolCall(
            id=call_id,
            name=f"{self.tool.name}.{request.get('tool', 'tool')}",
            arguments=arguments if isinstance(arguments, dict) else {},
        )
        prompt = request.get("prompt") or f"The agent '{self.tool.name}' asks to run this."
        answer = await handler(run, call, Ask(prompt=str(prompt)))
        if answer is True or isinstance(answer, Allow):
            return {"tool_call_id": call_id, "approved": True}
        reason = answer.reason if isinstance(answer, Deny) and answer.reason else "Denied."
        return {"tool_call_id": call_id, "approved": False, "reason": reason}

    async def _cancel_remote(self) -> None:
        """Pass a cancellation on: the remote task is cancelled too (bounded, shielded)."""
        with anyio.move_on_after(10, shield=True):
            try:
                client = await self.remote.client()
                await client.cancel_task(CancelTaskRequest(id=self.task_id or ""))
            except (A2AClientError, httpx.HTTPError):
                pass  # already over, or unreachable: nothing more to stop


def _status_of(event: StreamResponse) -> Any:
    kind = event.WhichOneof("payload")
    if kind == "task":
        return event.task.status
    if kind == "status_update":
        return event.status_update.status
    return None


def _text(parts: Any) -> str:
    return "\n".join(p.text for p in parts if p.WhichOneof("content") == "text")


def _card_description(card: AgentCard) -> str:
    skills = "; ".join(f"{s.name}: {s.description}" for s in card.skills if s.description)
    base = card.description or f"The agent {card.name}."
    return f"{base} Skills — {skills}" if skills else base


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


def _check_same_origin(url: str, card: AgentCard) -> None:
    for interface in card.supported_interfaces:
        if _origin(interface.url) != _origin(url):
            raise A2AError(
                f"the agent card of {url} gives its address as {interface.url!r}, another "
                "origin: credentials go only to the origin you named, so it is not called "
                "(give A2AAgent that address instead, if you trust it)"
            )


def _short(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__)[:300]

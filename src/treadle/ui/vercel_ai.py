"""The Vercel AI SDK UI message stream: serve a treadle agent to ``useChat`` (``ai`` /
``@ai-sdk/react``, version 5 and later).

``vercel_ai_app(agent)`` is an ASGI app (Starlette, extra ``web``) answering ``useChat``'s
``POST /api/chat`` with the UI message stream (header ``x-vercel-ai-ui-message-stream: v1``)
and its resume request ``GET /api/chat/{id}/stream``. For other frameworks,
:func:`start_run` and :func:`stream_run` do the same work. See docs/ui.md.

Mapping: ``start`` / ``finish`` per run, ``start-step`` / ``finish-step`` per turn,
``text-*`` and ``reasoning-*`` parts, ``tool-input-start`` / ``-delta`` / ``-available``,
``tool-output-available`` / ``-error`` / ``-denied`` (a tool's files and images: a ``file``
chunk each, after its output), a ``source-url`` per web page an answer cites (after its
text), ``error``, then ``[DONE]``. A call a
``before_tool_call`` hook answers with ``Ask`` becomes ``tool-approval-request``; the
client's answer (a tool part in state ``approval-responded``) resumes the run. Tools the
client runs itself are :class:`~treadle.tools.ExternalTool` on the agent: the run stops on
them and the client's ``addToolOutput`` result continues it.

Resuming: the AI SDK's own resume (``resume: true``) replays the active run from its start
(its default ``resumeStreamIsReplay``). treadle also gives every frame an SSE ``id``; a
resume request with ``Last-Event-ID`` gets only the frames after it (for
``resumeStreamIsReplay: false`` clients, which keep the partial message).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, Literal

from ..agent import Agent, AgentSnapshot
from ..loop import Allow, Deny
from ..tools import Tool, traits_of
from ..types import (
    AgentEnd,
    AgentMessage,
    AgentStart,
    AssistantMessage,
    ContinuationKind,
    CustomEvent,
    FileContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    TurnEnd,
    TurnStart,
    UserContent,
    UserMessage,
)
from ._files import file_from_url, media_of, ui_file_chunk
from ._gate import Decision, admit_client_history, admit_server_input, apply_decisions
from ._guard import DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY_BYTES
from ._runs import LiveRun, RequestError, UIRuns, parse_cursor, sse_body
from ._translate import FrameData, PartsTranslator

__all__ = [
    "UI_MESSAGE_STREAM_HEADERS",
    "VercelAITranslator",
    "find_run",
    "messages_from_ui",
    "start_run",
    "stream_run",
    "vercel_ai_app",
]

UI_MESSAGE_STREAM_HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}


def _output_text(output: Any) -> str:
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def _file(part: Mapping[str, Any], where: str) -> FileContent:
    return file_from_url(part.get("url"), part.get("mediaType"), part.get("filename"), where)


def messages_from_ui(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[AgentMessage], dict[str, Decision]]:
    """``useChat`` messages (UIMessage: ``role`` and ``parts``) as treadle's history, and
    the approval answers they carry (tool parts in state ``approval-responded``). Each
    ``step-start`` begins a new assistant message; tool parts with an output add a tool
    result after it. A user's ``file`` parts (data URLs or https) become ``FileContent``, and
    so does a ``file`` part after a tool's output (the tool's file, in its result)."""
    history: list[AgentMessage] = []
    decisions: dict[str, Decision] = {}
    for message in messages:
        role = message.get("role")
        parts = message.get("parts") or []
        if role == "user":
            blocks: list[UserContent] = []
            for n, p in enumerate(parts):
                if p.get("type") == "text":
                    blocks.append(TextContent(text=str(p.get("text", ""))))
                elif p.get("type") == "file":
                    where = f"message {message.get('id', len(history))!r}, part {n}"
                    blocks.append(_file(p, where))
            if not parts and isinstance(message.get("content"), str):
                blocks = [TextContent(text=message["content"])]
            history.append(UserMessage(content=blocks))
        elif role == "assistant":
            _assistant(parts, history, decisions)
    return history, decisions


def _assistant(
    parts: Sequence[Mapping[str, Any]], history: list[AgentMessage], decisions: dict[str, Decision]
) -> None:
    blocks: list[Any] = []
    results: list[ToolResultMessage] = []

    def flush() -> None:
        if blocks:
            history.append(AssistantMessage(content=list(blocks)))
            history.extend(results)
        blocks.clear()
        results.clear()

    for n, part in enumerate(parts):
        kind = str(part.get("type", ""))
        if kind == "step-start":
            flush()
        elif kind == "file":  # a tool's file (the stream sends it after the tool's output)
            if results:
                results[-1].content.append(_file(part, f"an assistant message's part {n}"))
        elif kind in ("text", "reasoning"):
            if results:
                flush()
            text = str(part.get("text", ""))
            if text:
                blocks.append(
                    TextContent(text=text) if kind == "text" else ThinkingContent(thinking=text)
                )
        elif kind.startswith("tool-") or kind == "dynamic-tool":
            name = str(part.get("toolName", "")) if kind == "dynamic-tool" else kind[5:]
            call_id = str(part.get("toolCallId", ""))
            raw = part.get("input")
            arguments = raw if isinstance(raw, dict) else ({} if raw is None else {"input": raw})
            blocks.append(ToolCall(id=call_id, name=name, arguments=arguments))
            state = part.get("state")
            result: ToolResultMessage | None = None
            if state == "output-available":
                result = ToolResultMessage(
                    tool_call_id=call_id, tool_name=name, content=_output_text(part.get("output"))
                )
            elif state == "output-error":
                result = ToolResultMessage(
                    tool_call_id=call_id,
                    tool_name=name,
                    content=str(part.get("errorText", "")),
                    is_error=True,
                )
            elif state == "output-denied":
                reason = (part.get("approval") or {}).get("reason") or "The user denied this call."
                result = ToolResultMessage(
                    tool_call_id=call_id, tool_name=name, content=reason, is_error=True
                )
            elif state == "approval-responded":
                approval = part.get("approval") or {}
                decisions[call_id] = (
                    Allow()
                    if approval.get("approved")
                    else Deny(str(approval.get("reason") or "The user denied this tool call."))
                )
            if result is not None:
                results.append(result)
    flush()


def source_parts(message: AssistantMessage, message_id: str) -> list[dict[str, Any]]:
    """Each web page ``message`` cites, once, as the AI SDK's ``source-url`` part. Only
    ``http(s)`` addresses: a client renders these as links, and a model's answer is data
    (a ``javascript:`` address must never become one); cited documents and files have no
    address to link to."""
    urls: dict[str, str | None] = {}
    for block in message.content:
        for citation in block.citations if isinstance(block, TextContent) else ():
            url = citation.url or ""
            if url[:8].lower().startswith(("http://", "https://")) and url not in urls:
                urls[url] = citation.title
    return [
        {"type": "source-url", "sourceId": f"{message_id}-source-{n}", "url": url}
        | ({"title": title} if title else {})
        for n, (url, title) in enumerate(urls.items())
    ]


class VercelAITranslator(PartsTranslator):
    """treadle events → UI message stream chunks for one run."""

    def __init__(
        self, run_id: str, *, message_id: str | None = None, denied: Sequence[str] = ()
    ) -> None:
        super().__init__(run_id)
        self.ui_message_id = message_id or run_id
        self.denied = set(denied)

    def _emit(self, kind: str, **fields: Any) -> None:
        self.out.append({"type": kind, **fields})

    def on_run_start(self, event: AgentStart) -> None:
        self._emit("start", messageId=self.ui_message_id)

    def on_turn_start(self, event: TurnStart) -> None:
        self._emit("start-step")

    def on_turn_end(self, event: TurnEnd) -> None:
        self._emit("finish-step")

    def on_text_start(self, part_id: str) -> None:
        self._emit("text-start", id=part_id)

    def on_text_delta(self, part_id: str, text: str) -> None:
        self._emit("text-delta", id=part_id, delta=text)

    def on_text_end(self, part_id: str) -> None:
        self._emit("text-end", id=part_id)

    def on_reasoning_start(self, part_id: str) -> None:
        self._emit("reasoning-start", id=part_id)

    def on_reasoning_delta(self, part_id: str, text: str) -> None:
        self._emit("reasoning-delta", id=part_id, delta=text)

    def on_reasoning_end(self, part_id: str) -> None:
        self._emit("reasoning-end", id=part_id)

    def on_message_end(self, message_id: str, message: AssistantMessage) -> None:
        self.out.extend(source_parts(message, message_id))

    def on_tool_input_start(self, call_id: str, name: str) -> None:
        self._emit("tool-input-start", toolCallId=call_id, toolName=name)

    def on_tool_input_delta(self, call_id: str, arguments: str) -> None:
        self._emit("tool-input-delta", toolCallId=call_id, inputTextDelta=arguments)

    def on_tool_input_end(self, call: ToolCall) -> None:
        self._emit(
            "tool-input-available", toolCallId=call.id, toolName=call.name, input=call.arguments
        )

    def on_tool_result(self, message: ToolResultMessage) -> None:
        call_id = message.tool_call_id
        if call_id in self.denied:
            self._emit("tool-output-denied", toolCallId=call_id)
        elif message.is_error:
            self._emit("tool-output-error", toolCallId=call_id, errorText=message.text)
        else:
            self._emit("tool-output-available", toolCallId=call_id, output=message.text)
            for block in media_of(message.content):  # a tool's files and images
                chunk = ui_file_chunk(block)
                if chunk is not None:
                    self.out.append(chunk)

    def on_custom(self, event: CustomEvent) -> None:
        suffix = "".join(c if c.isalnum() or c in "-_" else "-" for c in event.name)
        self._emit(f"data-{suffix}", data=event.value)

    def on_run_end(self, event: AgentEnd) -> None:
        reason = event.reason
        if reason == "suspended":
            for call_id in event.pending_tool_calls:
                if not self._external(call_id):
                    self._emit("tool-approval-request", approvalId=call_id, toolCallId=call_id)
        if reason == "error":
            self._emit("error", errorText=event.error.message if event.error else "the run failed")
        if reason == "cancelled":
            self._emit("abort", reason="cancelled")
        finish = {"completed": "stop", "suspended": "tool-calls", "error": "error"}.get(
            reason, "other"
        )
        self._emit("finish", finishReason=finish)
        self.out.append("[DONE]")

    external_names: frozenset[str] = frozenset()

    def _external(self, call_id: str) -> bool:
        return self.tool_names.get(call_id) in self.external_names

    def failure(self, message: str) -> list[FrameData]:
        return [
            {"type": "error", "errorText": message},
            {"type": "finish", "finishReason": "error"},
            "[DONE]",
        ]


def start_run(runs: UIRuns, body: Any) -> LiveRun:
    """Start the run a ``useChat`` request asks for (``{id, messages, trigger, ...}``).
    Raises :class:`~treadle.ui.RequestError` for a body that is not one."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise RequestError("expected useChat's request body: {id, messages: [...], trigger}", 422)
    chat_id = str(body.get("id") or uuid.uuid4().hex)
    agent = runs.agent_for(chat_id)
    if agent.running:
        raise RequestError(f"chat {chat_id!r} already has a run in progress", 409)
    try:
        history, decisions = messages_from_ui(body["messages"])
    except (ValueError, TypeError, AttributeError) as exc:
        raise RequestError(f"could not read the messages: {exc}", 422) from None
    prompt = _take_input(runs, agent, history, decisions, chat_id)
    apply_decisions(agent.context, decisions)
    last = body["messages"][-1] if body["messages"] else {}
    continuing = not prompt and last.get("role") == "assistant"
    run_id = uuid.uuid4().hex
    translator = VercelAITranslator(
        run_id,
        message_id=str(last.get("id")) if continuing and last.get("id") else None,
        denied=[c for c, d in decisions.items() if isinstance(d, Deny)],
    )
    translator.external_names = frozenset(
        t.name for t in agent.context.tools if isinstance(t, Tool) and traits_of(t).external
    )
    return runs.start(agent, prompt, translator, thread_id=chat_id, run_id=run_id)


def _take_input(
    runs: UIRuns,
    agent: Agent[Any],
    history: list[AgentMessage],
    decisions: dict[str, Decision],
    chat_id: str,
) -> list[AgentMessage]:
    """The run's prompt; the agent's history made ready for it. Only what the server asked
    for is taken from the client (ui/_gate.py): a :class:`RequestError` otherwise, before
    anything changed."""
    last = history[-1] if history else None
    if runs.history == "server":
        results = [m for m in history if isinstance(m, ToolResultMessage)]
        agent.messages.extend(admit_server_input(agent.context, decisions, results))
        return [last] if isinstance(last, UserMessage) else []
    agent.context.continuation_kind = ContinuationKind.INITIAL
    agent.context.parent_loop_id = None
    prompt: list[AgentMessage] = []
    if isinstance(last, UserMessage):
        history, prompt = history[:-1], [last]
    agent.restore(AgentSnapshot(messages=history))
    admit_client_history(agent.context, runs.waiting_on(chat_id), decisions)
    return prompt


def stream_run(live: LiveRun, last_event_id: str | None = None) -> AsyncIterator[bytes]:
    """The SSE body for ``live``: from its start, or after ``last_event_id``."""
    return sse_body(live, parse_cursor(last_event_id))


def find_run(runs: UIRuns, chat_id: str, *, last_event_id: str | None = None) -> LiveRun | None:
    """The run a resume request for ``chat_id`` continues: the newest one while it is going
    (or, with a cursor, also once it ended), else ``None`` (answer 204)."""
    live = runs.latest(chat_id)
    if live is None or (live.done.is_set() and parse_cursor(last_event_id) is None):
        return None
    return live


def vercel_ai_app(
    agent: Any,
    *,
    history: Literal["client", "server"] = "client",
    path: str = "/api/chat",
    token: str | None = None,
    origins: Iterable[str] = (),
    trusted_hosts: Iterable[str] = (),
    allow_remote: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
) -> Any:
    """An ASGI app (Starlette) for ``useChat``: ``POST {path}`` and ``GET
    {path}/{id}/stream``. ``agent``: an :class:`~treadle.Agent` (a template: each request
    runs on a branch with the client's messages) or ``chat_id -> Agent`` with
    ``history="server"``.

    Each route is guarded (see docs/security.md), also when mounted elsewhere: without
    ``token``, loopback peers asking for a loopback name only; a state-changing request
    with a foreign or ``null`` ``Origin`` (one not in ``origins``), or with none and not
    ``application/json``, is refused. ``trusted_hosts``: ``Host`` names answered besides
    loopback ones; ``allow_remote``: serve other machines without a token (your own
    authentication in front). Bodies: at most ``max_body_bytes``, read within
    ``body_timeout`` seconds."""
    from ._asgi import build_app

    runs = UIRuns(agent, history=history)
    return build_app(
        runs,
        start_run,
        stream_run,
        path=path,
        reconnect_path=f"{path.rstrip('/')}/{{chat_id}}/stream",
        guard={
            "token": token,
            "origins": origins,
            "trusted_hosts": trusted_hosts,
            "allow_remote": allow_remote,
            "max_body_bytes": max_body_bytes,
            "body_timeout": body_timeout,
        },
        find=lambda runs, params, cursor: find_run(
            runs, str(params["chat_id"]), last_event_id=cursor
        ),
        headers=UI_MESSAGE_STREAM_HEADERS,
    )

"""AG-UI: serve a treadle agent to AG-UI front ends (CopilotKit, ``@ag-ui/client``).

``ag_ui_app(agent)`` is an ASGI app (Starlette, extra ``web``): POST a ``RunAgentInput``,
read the run as AG-UI events over Server-Sent Events. For other frameworks,
:func:`start_run` starts a run from a request body and :func:`stream_run` gives the SSE
body. See docs/ui.md.

Mapping: ``RUN_STARTED`` / ``RUN_FINISHED`` (outcome ``success``, ``interrupt`` for
approvals, ``cancelled``) / ``RUN_ERROR``; a ``STEP_STARTED`` / ``STEP_FINISHED`` pair per
turn; ``TEXT_MESSAGE_*`` for the answer and ``TOOL_CALL_START`` / ``ARGS`` / ``END`` /
``RESULT`` for tool calls (a tool's files and images as content parts of the result), under
one ``messageId`` per assistant message (the calls' ``parentMessageId``); ``REASONING_*``
for thinking; ``STATE_SNAPSHOT`` (unless the state is empty) and ``STATE_DELTA`` (JSON
Patch) when the input carries ``state`` (tools change it through ``ctx.context.state``).
Front-end tools (the input's ``tools``) become :class:`~treadle.tools.ExternalTool` calls
the run stops on: ``RUN_FINISHED`` lists them in ``pendingToolCallIds`` and the next
input's messages carry their results.

Resuming (treadle's extension; AG-UI has no slot for it): every frame has an SSE ``id``
(``seq`` or ``seq.n``); POST the same ``runId`` with a ``Last-Event-ID`` header and the
stream continues after that frame — first a copy of ``RUN_STARTED`` and of the start
frames of any message, tool call or step still open, then exactly the frames not yet seen.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Literal

from pydantic import AliasGenerator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ..agent import Agent, AgentSnapshot
from ..loop import Allow, Deny
from ..tools import ExternalTool
from ..types import (
    AgentEnd,
    AgentMessage,
    AgentStart,
    AssistantMessage,
    ContinuationKind,
    CustomEvent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from ._files import ag_ui_content, ag_ui_files
from ._gate import Decision, admit_client_history, admit_server_input, apply_decisions
from ._guard import DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY_BYTES, load_json
from ._runs import (
    Cursor,
    Frame,
    LiveRun,
    RequestError,
    UIRuns,
    add_external_tools,
    parse_cursor,
    sse_body,
)
from ._translate import FrameData, PartsTranslator

__all__ = [
    "AGUITranslator",
    "RunAgentInput",
    "ag_ui_app",
    "messages_from_ag_ui",
    "messages_to_ag_ui",
    "resume_prelude",
    "start_run",
    "stream_run",
]


class _Wire(BaseModel):
    model_config = ConfigDict(
        alias_generator=AliasGenerator(validation_alias=to_camel),
        populate_by_name=True,
        extra="allow",
    )


class AGUITool(_Wire):
    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None


class AGUIContext(_Wire):
    description: str
    value: str


class AGUIResume(_Wire):
    interrupt_id: str
    status: Literal["resolved", "cancelled"]
    payload: Any = None


class RunAgentInput(_Wire):
    """The request body of an AG-UI run (the fields treadle reads; others are kept)."""

    thread_id: str
    run_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[AGUITool] = Field(default_factory=list)
    context: list[AGUIContext] = Field(default_factory=list)
    state: Any = None
    resume: list[AGUIResume] = Field(default_factory=list)
    forwarded_props: Any = None


# ---- messages ----


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _tool_calls(raw: Any) -> list[ToolCall]:
    """An assistant message's ``toolCalls``: ``[{id, function: {name, arguments}}]``, the
    arguments a JSON object in a string; :class:`RequestError` (422) for anything else."""
    if raw is None:
        return []
    shape = "toolCalls must be [{id, type: 'function', function: {name, arguments}}]"
    if not isinstance(raw, list):
        raise RequestError(shape, 422)
    calls: list[ToolCall] = []
    for call in raw:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(call.get("id"), str):
            raise RequestError(shape, 422)
        name, text = fn.get("name", ""), fn.get("arguments") or "{}"
        if not isinstance(name, str) or not isinstance(text, str):
            raise RequestError(f"tool call {call['id']!r}: {shape}", 422)
        try:
            arguments = load_json(text.encode())
        except ValueError as exc:
            raise RequestError(f"tool call {call['id']!r}: arguments: {exc}", 422) from None
        if not isinstance(arguments, dict):
            raise RequestError(f"tool call {call['id']!r}: arguments must be a JSON object", 422)
        calls.append(ToolCall(id=call["id"], name=name, arguments=arguments))
    return calls


def messages_from_ag_ui(messages: Sequence[dict[str, Any]]) -> tuple[list[AgentMessage], str]:
    """AG-UI messages as treadle's history, and the text of their system / developer
    messages (for the system prompt). Activity and reasoning messages are left out."""
    history: list[AgentMessage] = []
    system: list[str] = []
    names: dict[str, str] = {}
    for raw in messages:
        role = raw.get("role")
        if role in ("system", "developer"):
            system.append(_text_of(raw.get("content")))
        elif role == "user":
            content = raw.get("content")
            files = ag_ui_files(content, f"message {raw.get('id', len(history))!r}")
            history.append(UserMessage(content=[TextContent(text=_text_of(content)), *files]))
        elif role == "assistant":
            blocks: list[Any] = []
            if text := _text_of(raw.get("content")):
                blocks.append(TextContent(text=text))
            for call in _tool_calls(raw.get("toolCalls")):
                names[call.id] = call.name
                blocks.append(call)
            history.append(AssistantMessage(content=blocks))
        elif role == "tool":
            call_id = str(raw.get("toolCallId", ""))
            error, content = raw.get("error"), raw.get("content")
            files = ag_ui_files(content, f"the result of tool call {call_id!r}")
            history.append(
                ToolResultMessage(
                    tool_call_id=call_id,
                    tool_name=names.get(call_id, ""),
                    content=[TextContent(text=str(error or _text_of(content))), *files],
                    is_error=bool(error),
                )
            )
    return history, "\n\n".join(s for s in system if s)


def messages_to_ag_ui(
    messages: Sequence[AgentMessage], *, id_prefix: str = "m"
) -> list[dict[str, Any]]:
    """treadle's history as AG-UI messages (for ``MESSAGES_SNAPSHOT`` or a client's store)."""
    out: list[dict[str, Any]] = []
    for n, message in enumerate(messages):
        mid = f"{id_prefix}{n}"
        if isinstance(message, UserMessage):
            content = ag_ui_content(message.text, message.content)
            out.append({"id": mid, "role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            item: dict[str, Any] = {"id": mid, "role": "assistant"}
            if message.text:
                item["content"] = message.text
            if message.tool_calls:
                item["toolCalls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in message.tool_calls
                ]
            out.append(item)
        elif isinstance(message, ToolResultMessage):
            item = {"id": mid, "role": "tool", "toolCallId": message.tool_call_id}
            item["content"] = ag_ui_content(message.text, message.content)
            if message.is_error:
                item["error"] = message.text
            out.append(item)
    return out


# ---- events ----


def _state_patch(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    """A JSON Patch (RFC 6902) turning ``old`` into ``new``: objects key by key, anything
    else replaced whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[dict[str, Any]] = []
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "add", "path": f"{path}/{_escape(key)}", "value": value})
            else:
                ops.extend(_state_patch(old[key], value, f"{path}/{_escape(key)}"))
        return ops
    if old == new and type(old) is type(new):
        return []
    return [{"op": "replace", "path": path, "value": new}]


def _escape(key: str) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


class AGUITranslator(PartsTranslator):
    """treadle events → AG-UI events (JSON objects) for one run."""

    def __init__(
        self,
        run_id: str,
        thread_id: str,
        *,
        state: dict[str, Any] | None = None,
        external: Sequence[str] = (),
    ) -> None:
        super().__init__(run_id)
        self.thread_id = thread_id
        self.state = state
        self._sent_state = copy.deepcopy(state) if state is not None else None
        self.external = set(external)
        self._model: dict[str, str] = {}

    def _emit(self, kind: str, **fields: Any) -> None:
        self.out.append({"type": kind, **fields})

    def on_run_start(self, event: AgentStart) -> None:
        self._model = {k: str(event.config.get(k) or "") for k in ("provider", "model")}
        self._emit("RUN_STARTED", threadId=self.thread_id, runId=self.run_id)
        if self.state:  # an empty or absent state needs no snapshot
            self._emit("STATE_SNAPSHOT", snapshot=self._sent_state)

    def on_turn_start(self, event: TurnStart) -> None:
        self._emit("STEP_STARTED", stepName=f"turn {event.turn_index}")

    def on_turn_end(self, event: TurnEnd) -> None:
        self._emit("STEP_FINISHED", stepName=f"turn {event.turn_index}")

    # One id per assistant message: its text parts and its tool calls' parentMessageId
    # share it, so a client (``@ag-ui/client``) rebuilds one message with text and calls;
    # its thinking is one reasoning message beside it.

    def on_text_start(self, part_id: str) -> None:
        self._emit("TEXT_MESSAGE_START", messageId=self.message_id, role="assistant")

    def on_text_delta(self, part_id: str, text: str) -> None:
        self._emit("TEXT_MESSAGE_CONTENT", messageId=self.message_id, delta=text)

    def on_text_end(self, part_id: str) -> None:
        self._emit("TEXT_MESSAGE_END", messageId=self.message_id)

    @property
    def reasoning_id(self) -> str:
        """The id of the current assistant message's reasoning message."""
        return f"{self.message_id}-reasoning"

    def on_reasoning_start(self, part_id: str) -> None:
        self._emit("REASONING_START", messageId=self.reasoning_id)
        self._emit("REASONING_MESSAGE_START", messageId=self.reasoning_id, role="reasoning")

    def on_reasoning_delta(self, part_id: str, text: str) -> None:
        self._emit("REASONING_MESSAGE_CONTENT", messageId=self.reasoning_id, delta=text)

    def on_reasoning_end(self, part_id: str) -> None:
        self._emit("REASONING_MESSAGE_END", messageId=self.reasoning_id)
        self._emit("REASONING_END", messageId=self.reasoning_id)

    def on_tool_input_start(self, call_id: str, name: str) -> None:
        self._emit(
            "TOOL_CALL_START",
            toolCallId=call_id,
            toolCallName=name,
            parentMessageId=self.message_id,
        )

    def on_tool_input_delta(self, call_id: str, arguments: str) -> None:
        self._emit("TOOL_CALL_ARGS", toolCallId=call_id, delta=arguments)

    def on_tool_input_end(self, call: ToolCall) -> None:
        self._emit("TOOL_CALL_END", toolCallId=call.id)

    def on_tool_result(self, message: ToolResultMessage) -> None:
        self._emit(
            "TOOL_CALL_RESULT",
            messageId=f"{self.run_id}-result-{message.tool_call_id}",
            toolCallId=message.tool_call_id,
            content=ag_ui_content(message.text, message.content),
            role="tool",
        )
        if self.state is not None:
            patch = _state_patch(self._sent_state, self.state)
            if patch:
                self._sent_state = copy.deepcopy(self.state)
                self._emit("STATE_DELTA", delta=patch)

    def on_custom(self, event: CustomEvent) -> None:
        self._emit("CUSTOM", name=event.name, value=event.value)

    def on_run_end(self, event: AgentEnd) -> None:
        ids = {"threadId": self.thread_id, "runId": self.run_id}
        if event.reason == "error":
            error = event.error
            self._emit(
                "RUN_ERROR",
                message=error.message if error else "the run failed",
                code=error.kind if error else "error",
            )
            return
        usage = event.usage
        inputs = usage.input + usage.cache_read + usage.cache_write
        usage_entry = {
            **{k: v for k, v in self._model.items() if v},
            "inputTokens": inputs,
            "outputTokens": usage.output,
            "totalTokens": inputs + usage.output,
            "reasoningTokens": usage.reasoning,
            "cachedInputTokens": usage.cache_read,
            "cacheWriteInputTokens": usage.cache_write,
        }
        outcome: dict[str, Any]
        if event.reason == "cancelled":
            outcome = {"type": "cancelled"}
        else:
            pending = list(event.pending_tool_calls)
            approvals = [c for c in pending if self.tool_names.get(c) not in self.external]
            if approvals:
                outcome = {
                    "type": "interrupt",
                    "interrupts": [
                        {
                            "id": call_id,
                            "reason": "tool_approval",
                            "toolCallId": call_id,
                            "message": f"Allow {self.tool_names.get(call_id, 'this tool')}?",
                            "responseSchema": _APPROVAL_SCHEMA,
                        }
                        for call_id in approvals
                    ],
                }
            else:
                outcome = {"type": "success"}
                if pending:
                    outcome["pendingToolCallIds"] = pending
        self._emit("RUN_FINISHED", **ids, outcome=outcome, usage=[usage_entry])

    def failure(self, message: str) -> list[FrameData]:
        return [{"type": "RUN_ERROR", "message": message, "code": "server"}]


_APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}

_OPENERS = {
    "TEXT_MESSAGE_START": ("TEXT_MESSAGE_END", "messageId"),
    "TOOL_CALL_START": ("TOOL_CALL_END", "toolCallId"),
    "STEP_STARTED": ("STEP_FINISHED", "stepName"),
    "REASONING_START": ("REASONING_END", "messageId"),
    "REASONING_MESSAGE_START": ("REASONING_MESSAGE_END", "messageId"),
}


def resume_prelude(frames: Sequence[Frame], after: Cursor) -> list[Frame]:
    """What a client reconnecting after ``after`` needs before the frames it missed:
    ``RUN_STARTED`` and the start frames of whatever was still open (AG-UI clients check
    that every content frame follows its start in the same run)."""
    started: Frame | None = None
    open_frames: dict[tuple[str, str], Frame] = {}
    closers = {end: (start, key) for start, (end, key) in _OPENERS.items()}
    for frame in frames:
        if frame.cursor > after:
            break
        data = frame.data
        if not isinstance(data, dict):
            continue
        kind = data.get("type", "")
        if kind == "RUN_STARTED":
            started = frame
        elif kind in ("RUN_FINISHED", "RUN_ERROR"):
            return []
        elif kind in _OPENERS:
            open_frames[(kind, str(data.get(_OPENERS[kind][1])))] = frame
        elif kind in closers:
            start, key = closers[kind]
            open_frames.pop((start, str(data.get(key))), None)
    if started is None:
        return []
    return [started, *open_frames.values()]


# ---- running ----


def start_run(runs: UIRuns, body: Any) -> LiveRun:
    """Validate an AG-UI ``RunAgentInput`` and start its run (or find the run it names, for
    a reconnect). Raises :class:`RequestError` for a body that is not one."""
    try:
        data = RunAgentInput.model_validate(body)
    except ValueError as exc:
        raise RequestError(f"not an AG-UI RunAgentInput: {exc}", 422) from None
    existing = runs.get(data.run_id)
    if existing is not None:
        return existing
    agent = runs.agent_for(data.thread_id)
    if agent.running:
        raise RequestError(f"thread {data.thread_id!r} already has a run in progress", 409)
    try:
        history, system = messages_from_ag_ui(data.messages)
    except ValueError as exc:
        raise RequestError(str(exc), 422) from None
    decisions = _decisions(data.resume)
    external = [ExternalTool(t.name, t.description, t.parameters) for t in data.tools]
    prompt = _take_input(runs, agent, history, system, data, decisions)
    apply_decisions(agent.context, decisions)
    try:
        add_external_tools(agent, external)
    except ValueError as exc:
        raise RequestError(str(exc), 422) from None
    state: dict[str, Any] | None = None
    if isinstance(data.state, dict):
        state = agent.context.state = dict(data.state)
    translator = AGUITranslator(
        data.run_id, data.thread_id, state=state, external=[t.name for t in external]
    )
    return runs.start(agent, prompt, translator, thread_id=data.thread_id, run_id=data.run_id)


def _decisions(resume: Sequence[AGUIResume]) -> dict[str, Decision]:
    """The ``resume`` entries as decisions: ``approved`` (with optional replacement
    ``arguments``, judged by the hooks again) or a denial with the client's reason."""
    decisions: dict[str, Decision] = {}
    for entry in resume:
        answer = entry.payload if isinstance(entry.payload, dict) else {}
        if entry.status == "resolved" and answer.get("approved", entry.payload is True):
            arguments = answer.get("arguments")
            if arguments is not None and not isinstance(arguments, dict):
                raise RequestError(
                    f"resume {entry.interrupt_id!r}: arguments must be a JSON object", 422
                )
            decisions[entry.interrupt_id] = Allow(arguments)
        else:
            decisions[entry.interrupt_id] = Deny(str(answer.get("reason") or "Not approved."))
    return decisions


def _take_input(
    runs: UIRuns,
    agent: Agent[Any],
    history: list[AgentMessage],
    system: str,
    data: RunAgentInput,
    decisions: dict[str, Decision],
) -> list[AgentMessage]:
    """The run's prompt; the agent's history made ready for it. Only what the server asked
    for is taken from the client (ui/_gate.py): a :class:`RequestError` otherwise, before
    anything changed."""
    context_text = "\n".join(f"{c.description}: {c.value}" for c in data.context)
    if runs.history == "server":  # the server's history is the truth: take the newest input
        results = [m for m in history if isinstance(m, ToolResultMessage)]
        agent.messages.extend(admit_server_input(agent.context, decisions, results))
        last = history[-1] if history else None
        return [last] if isinstance(last, UserMessage) else []
    extra = "\n\n".join(t for t in (system, context_text and f"Context:\n{context_text}") if t)
    if extra:
        base = agent.context.resolve_system_prompt()
        agent.context.system_prompt = f"{base}\n\n{extra}" if base else extra
    agent.context.continuation_kind = ContinuationKind.INITIAL
    agent.context.parent_loop_id = None
    prompt: list[AgentMessage] = []
    if history and isinstance(history[-1], UserMessage):
        history, prompt = history[:-1], [history[-1]]
    agent.restore(AgentSnapshot(messages=history))
    admit_client_history(agent.context, runs.waiting_on(data.thread_id), decisions)
    return prompt


def stream_run(live: LiveRun, last_event_id: str | None = None) -> AsyncIterator[bytes]:
    """The SSE body for ``live``: from the start, or after ``last_event_id`` (a
    ``Last-Event-ID`` header) with the prelude a reconnecting AG-UI client needs."""
    after = parse_cursor(last_event_id)
    prelude = resume_prelude(live.frames.frames, after) if after is not None else []
    return sse_body(live, after, prelude)


def ag_ui_app(
    agent: Any,
    *,
    history: Literal["client", "server"] = "client",
    path: str = "/",
    token: str | None = None,
    origins: Iterable[str] = (),
    trusted_hosts: Iterable[str] = (),
    allow_remote: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
) -> Any:
    """An ASGI app (Starlette) serving ``agent`` over AG-UI at ``POST {path}``; also
    ``GET {path}runs/{run_id}`` to read (or resume, with ``Last-Event-ID``) a run's
    stream. ``agent``: an :class:`~treadle.Agent` (a template: each request runs on a branch
    with the client's history) or ``thread_id -> Agent`` with ``history="server"``.

    Guarded as :func:`~treadle.ui.vercel_ai.vercel_ai_app` is (the same options; see
    docs/security.md)."""
    from ._asgi import build_app

    runs = UIRuns(agent, history=history)
    base = path.rstrip("/")
    return build_app(
        runs,
        start_run,
        stream_run,
        path=path,
        reconnect_path=f"{base}/runs/{{run_id}}",
        guard={
            "token": token,
            "origins": origins,
            "trusted_hosts": trusted_hosts,
            "allow_remote": allow_remote,
            "max_body_bytes": max_body_bytes,
            "body_timeout": body_timeout,
        },
        find=lambda runs, params, cursor: runs.get(str(params["run_id"])),
    )

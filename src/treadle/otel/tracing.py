"""Spans and metrics per the OpenTelemetry GenAI semantic conventions, built from the loop's
events (``Hooks.on_event``), so one hook traces a run and every sub-agent it starts."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .. import Hooks, RunHandle
from ..providers import ModelRequest
from ..types import AgentEvent, AssistantMessage, ToolResultMessage, UserMessage
from ._files import file_attributes, file_part, media_in

TRACER_NAME = "treadle"
PROVIDER_NAMES = {
    "openai": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "google": "gcp.gemini",
    "groq": "groq",
    "deepseek": "deepseek",
    "mistral": "mistral_ai",
}
FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_use": "tool_calls",
    "error": "error",
    "aborted": "cancelled",
}
DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                    40.96, 81.92]  # fmt: skip
TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                 16777216, 67108864]  # fmt: skip


@dataclass
class _Loop:
    span: Span
    provider: str
    model: str
    request: dict[str, Any]
    conversation: str
    chat: Span | None = None
    chat_started: float = 0.0
    tools: dict[str, Span] = field(default_factory=dict)
    tool_names: dict[str, str] = field(default_factory=dict)


class Tracing(Hooks):
    """A :class:`~treadle.Hooks` that turns runs into OpenTelemetry spans and metrics.

    Pass it where hooks go: ``Agent(..., hooks=[tracing])`` or
    ``AgentLoopConfig(hooks=[tracing])``. Sub-agents started by a traced run are traced
    too, nested under the parent's ``execute_tool`` span. ``capture_content=True`` records
    messages, tool arguments and results, and a failed tool's error text as its span's
    status description (off by default: they may hold personal data; a failed tool's span
    then says only the exception's type).

    The spans of a run in progress are kept in ``run.state_for(self)``, so one ``Tracing``
    serves any number of runs at once (forks of an Agent in a server)."""

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        agent_name: str = "treadle",
        capture_content: bool = False,
    ) -> None:
        self.tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
        meter = metrics.get_meter(TRACER_NAME, meter_provider=meter_provider)
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens used per model call, by token type.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Duration of a model call.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.agent_name = agent_name
        self.capture_content = capture_content

    # ---- hooks ----

    async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
        if request.purpose == "turn":  # attached to the chat span it precedes (side calls
            state = run.state_for(self)  # have no chat span)
            state["files"] = file_attributes(
                block
                for message in request.messages
                if isinstance(message, (UserMessage, ToolResultMessage))
                for block in message.content
            )
            if self.capture_content:
                state["request"] = request
        return request

    def on_event(self, run: RunHandle, event: AgentEvent) -> None:
        kind = event.type
        if kind == "message_update":
            return  # the hot path: nothing to trace per delta
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(run, event)

    def _loop(self, run: RunHandle | None) -> _Loop | None:
        """The spans of ``run`` (the run that sent the event) while it is traced."""
        if run is None:
            return None
        found: _Loop | None = run.state_for(self).get("loop")
        return found

    # ---- runs ----

    def _on_agent_start(self, run: RunHandle, event: Any) -> None:
        config = event.config or {}
        provider = PROVIDER_NAMES.get(str(config.get("provider", "")), config.get("provider", ""))
        model = str(config.get("model") or "")
        outer = self._loop(run.parent)
        parent = self._parent(outer, event)
        name = self.agent_name
        if outer is not None and event.parent_tool_call_id:
            name = outer.tool_names.get(event.parent_tool_call_id, name)
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": provider,
            "gen_ai.agent.name": name,
            "gen_ai.agent.id": event.agent_id,
            "gen_ai.conversation.id": event.session_id,
            "gen_ai.request.model": model,
            "treadle.loop_id": event.loop_id,
            "treadle.depth": event.depth,
        }
        span = self.tracer.start_span(
            f"invoke_agent {name}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=_clean(attributes),
            start_time=_ns(event.timestamp),
        )
        request = {
            "gen_ai.request.max_tokens": config.get("max_tokens"),
            "gen_ai.request.temperature": config.get("temperature"),
            "gen_ai.request.top_p": config.get("top_p"),
            "gen_ai.request.seed": config.get("seed"),
        }
        run.state_for(self)["loop"] = _Loop(span, provider, model, request, event.session_id)

    def _parent(self, outer: _Loop | None, event: Any) -> otel_context.Context | None:
        """The span a run's span goes under: the tool call of the run that started it."""
        if outer is None:
            return None  # the application's current span, if any
        tool = outer.tools.get(event.parent_tool_call_id or "")
        return trace.set_span_in_context(tool or outer.span)

    def _on_agent_end(self, run: RunHandle, event: Any) -> None:
        loop = run.state_for(self).pop("loop", None)
        if not isinstance(loop, _Loop):
            return
        error = _error_type(event.reason, event.error)
        end = _ns(event.timestamp)
        if loop.chat is not None:
            _fail(loop.chat, error or "cancelled", "the run ended during the model call")
            loop.chat.end(end)
        for span in loop.tools.values():
            _fail(span, error or "cancelled", "the run ended during the tool call")
            span.end(end)
        span = loop.span
        usage = event.usage
        span.set_attributes(
            _clean(
                {
                    "gen_ai.usage.input_tokens": usage.input,
                    "gen_ai.usage.output_tokens": usage.output,
                    "treadle.cost_usd": usage.cost_usd,
                    "treadle.end_reason": event.reason,
                }
            )
        )
        if error is not None:
            message = event.error.message if event.error is not None else event.reason
            if error == "tool" and not self.capture_content:
                message = message.split(":", 1)[0]  # "Type: text" (a raised tool error)
            _fail(span, error, message)
        span.end(end)

    # ---- model calls ----

    def _on_message_start(self, run: RunHandle, event: Any) -> None:
        if not isinstance(event.message, AssistantMessage):
            return
        loop = self._loop(run)
        if loop is not None and loop.chat is None:
            self._start_chat(run, loop, event.timestamp)

    def _start_chat(self, run: RunHandle, loop: _Loop, timestamp: int) -> Span:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": loop.provider,
            "gen_ai.request.model": loop.model,
            "gen_ai.conversation.id": loop.conversation,
            **loop.request,
        }
        attributes.update(run.state_for(self).pop("files", None) or {})
        request = run.state_for(self).pop("request", None)
        if self.capture_content and isinstance(request, ModelRequest):
            attributes["gen_ai.input.messages"] = json.dumps(_messages(request.messages))
            if request.system_prompt:
                attributes["gen_ai.system_instructions"] = json.dumps(
                    [{"type": "text", "content": request.system_prompt}]
                )
        loop.chat = self.tracer.start_span(
            f"chat {loop.model}".strip(),
            context=trace.set_span_in_context(loop.span),
            kind=SpanKind.CLIENT,
            attributes=_clean(attributes),
            start_time=_ns(timestamp),
        )
        loop.chat_started = time.monotonic()
        return loop.chat

    def _on_provider_retry(self, run: RunHandle, event: Any) -> None:
        loop = self._loop(run)
        if loop is None:
            return
        chat = loop.chat or self._start_chat(run, loop, event.timestamp)  # failed before streaming
        chat.add_event(
            "gen_ai.client.retry",
            _clean(
                {
                    "treadle.retry.attempt": event.attempt,
                    "treadle.retry.max_retries": event.max_retries,
                    "treadle.retry.delay_s": event.delay_s,
                    "error.type": event.error_kind,
                    "http.response.status_code": event.status_code,
                }
            ),
            timestamp=_ns(event.timestamp),
        )

    def _on_provider_fallback(self, run: RunHandle, event: Any) -> None:
        loop = self._loop(run)
        if loop is None:
            return
        chat = loop.chat or self._start_chat(run, loop, event.timestamp)  # failed before streaming
        chat.add_event(
            "treadle.fallback",
            _clean(
                {
                    "treadle.fallback.from": f"{event.from_provider}:{event.from_model}",
                    "treadle.fallback.to": f"{event.to_provider}:{event.to_model}",
                    "error.type": event.error_kind,
                    "http.response.status_code": event.status_code,
                }
            ),
            timestamp=_ns(event.timestamp),
        )

    def _on_message_end(self, run: RunHandle, event: Any) -> None:
        message = event.message
        if not isinstance(message, AssistantMessage):
            return
        loop = self._loop(run)
        if loop is None or loop.chat is None:
            return
        span, loop.chat = loop.chat, None
        usage = message.usage
        finish = FINISH_REASONS.get(message.stop_reason, message.stop_reason)
        span.set_attributes(
            _clean(
                {
                    "gen_ai.response.model": message.model or None,
                    "gen_ai.response.id": message.response_id,
                    "gen_ai.response.finish_reasons": [finish],
                    "gen_ai.usage.input_tokens": usage.input,
                    "gen_ai.usage.output_tokens": usage.output,
                    "gen_ai.usage.cache_read.input_tokens": usage.cache_read or None,
                    "treadle.cost_usd": usage.cost_usd,
                }
            )
        )
        if self.capture_content:
            span.set_attribute("gen_ai.output.messages", json.dumps(_messages([message])))
        error = None
        if message.stop_reason == "error":
            error = message.error.kind if message.error is not None else "error"
            _fail(span, error, message.error.message if message.error else "the call failed")
        elif message.stop_reason == "aborted":
            error = "cancelled"
            _fail(span, error, "cancelled")
        span.end(_ns(event.timestamp))
        self._record_metrics(loop, message, error, time.monotonic() - loop.chat_started)

    def _record_metrics(
        self, loop: _Loop, message: AssistantMessage, error: str | None, seconds: float
    ) -> None:
        common = _clean(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": loop.provider,
                "gen_ai.request.model": loop.model,
                "gen_ai.response.model": message.model or None,
                "error.type": error,
            }
        )
        self.duration.record(seconds, common)
        if error is None or message.usage.total_tokens:
            self.token_usage.record(message.usage.input, {**common, "gen_ai.token.type": "input"})
            self.token_usage.record(message.usage.output, {**common, "gen_ai.token.type": "output"})

    # ---- tools ----

    def _on_tool_execution_start(self, run: RunHandle, event: Any) -> None:
        loop = self._loop(run)
        if loop is None:
            return
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.tool_name,
            "gen_ai.tool.call.id": event.tool_call_id,
            "gen_ai.tool.type": _tool_type(event.tool_category),
        }
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(event.args, default=str)
        loop.tools[event.tool_call_id] = self.tracer.start_span(
            f"execute_tool {event.tool_name}",
            context=trace.set_span_in_context(loop.span),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=_ns(event.timestamp),
        )
        loop.tool_names[event.tool_call_id] = event.tool_name

    def _on_tool_execution_end(self, run: RunHandle, event: Any) -> None:
        loop = self._loop(run)
        if loop is None:
            return
        span = loop.tools.pop(event.tool_call_id, None)
        loop.tool_names.pop(event.tool_call_id, None)
        if span is None:
            return
        span.set_attributes(file_attributes(event.result.content))  # sizes and types only
        if self.capture_content:
            span.set_attribute("gen_ai.tool.call.result", event.result.text)
        if event.child_loop_id:
            span.set_attribute("treadle.child_loop_id", event.child_loop_id)
        if event.is_error:
            raised = event.error_type
            kind = "cancelled" if event.result.cancelled else (raised or "tool_error")
            # The result's text may quote private data ("no record for <name>"): only
            # with content capture on; otherwise the failure's kind alone.
            _fail(span, kind, event.result.text[:500] if self.capture_content else kind)
        span.end(_ns(event.timestamp))


def _messages(messages: list[Any]) -> list[dict[str, Any]]:
    """Messages in the conventions' JSON shape (role and parts); a file is a reference
    (:func:`~treadle.otel._files.file_part`), never its bytes."""
    out: list[dict[str, Any]] = []
    for message in messages:
        files = [file_part(b) for b in media_in(getattr(message, "content", ()))]
        if isinstance(message, UserMessage):
            text = {"type": "text", "content": message.text}
            out.append({"role": "user", "parts": [text, *files]})
        elif isinstance(message, ToolResultMessage):
            part = {"type": "tool_call_response", "id": message.tool_call_id}
            out.append({"role": "tool", "parts": [{**part, "response": message.text}, *files]})
        elif isinstance(message, AssistantMessage):
            parts: list[dict[str, Any]] = []
            if message.text:
                parts.append({"type": "text", "content": message.text})
            for call in message.tool_calls:
                parts.append(
                    {
                        "type": "tool_call",
                        "id": call.id,
                        "name": call.name,
                        "arguments": call.arguments,
                    }
                )
            finish = FINISH_REASONS.get(message.stop_reason, message.stop_reason)
            out.append({"role": "assistant", "parts": parts, "finish_reason": finish})
    return out


def _tool_type(category: str | None) -> str:
    """``gen_ai.tool.type``: ``extension`` for a tool run outside the agent (an MCP
    server's: :attr:`~treadle.tools.ToolCategory.MCP`), ``function`` otherwise."""
    return "extension" if category == "mcp" else "function"


def _error_type(reason: str, error: Any) -> str | None:
    if reason in ("completed", "vetoed", "rejected", "suspended", "limit"):
        return None
    if reason == "cancelled":
        return "cancelled"
    return getattr(error, "kind", None) or reason


def _fail(span: Span, error_type: str, message: str) -> None:
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, message))


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None and v != ""}


def _ns(timestamp_ms: int) -> int:
    return int(timestamp_ms) * 1_000_000

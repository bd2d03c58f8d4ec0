"""Chat Completions streams, assembled: deltas of text, reasoning and tool calls into stream
events and the final AssistantMessage (also for a whole, non-streamed response)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from ..types import ErrorInfo, TextDelta, Usage
from ..types.usage import StopReason
from ._assemble import Assembler, count, text_delta, usage
from .base import StreamEvent

# Delta fields with a fixed meaning; any other field that looks like reasoning is thinking.
_STANDARD_FIELDS = frozenset(
    {"role", "content", "refusal", "tool_calls", "function_call", "audio", "annotations", "name"}
)
# Checked first, in this order; only one reasoning field is read per delta, because some
# servers repeat the same text in several (OpenRouter: ``reasoning`` and ``reasoning_details``).
_REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
# Some servers say "stop" after tool calls; the calls still need answering (``stop_for``).
_STOPS: dict[str, StopReason] = {
    "length": "length",
    "content_filter": "error",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
}
_FILTERED = "the provider's content filter stopped the response"


class ChatStream(Assembler):
    """Chunk payloads into the shared assembler's calls.

    Tool-call fragments are matched to their call by the provider's ``index`` (or id), so
    interleaved calls stay apart; a call is announced once its name is known.
    """

    def __init__(self, provider: str, model: str) -> None:
        super().__init__(provider, model)
        self.done = False  # [DONE] seen
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self._calls: dict[Any, int] = {}
        self._last_call: int | None = None

    def plain_text(self, payload: dict[str, Any]) -> TextDelta | None:
        """Fast path for the common chunk: more text for the open text block, nothing else.
        None sends the chunk through :meth:`chunk`."""
        at = self.current
        if at is None or self.blocks[at].kind != "text":
            return None
        choices = payload.get("choices")
        if type(choices) is not list or len(choices) != 1 or payload.get("usage") is not None:
            return None
        if "x_groq" in payload:
            return None
        choice = choices[0]
        if type(choice) is not dict or choice.get("finish_reason") or choice.get("index", 0):
            return None
        delta = choice.get("delta")
        if type(delta) is not dict:
            return None
        content = delta.get("content")
        if type(content) is not str or not content:
            return None
        for key, value in delta.items():
            if value is not None and key != "content" and key != "role":
                return None
        self.blocks[at].parts.append(content)
        return text_delta(at, content)

    def chunk(self, payload: dict[str, Any]) -> list[StreamEvent]:
        if not self.started:
            if isinstance(payload.get("model"), str) and payload["model"]:
                self.model = payload["model"]
            if isinstance(payload.get("id"), str):
                self.response_id = payload["id"]
            self.start()
        usage = payload.get("usage")
        if not isinstance(usage, dict):
            extra = payload.get("x_groq")
            usage = extra.get("usage") if isinstance(extra, dict) else None
        if isinstance(usage, dict):
            self.usage = _usage(usage)
        choices = payload.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # n > 1 is not supported: the first choice is the answer
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._delta(delta)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason
                self.end_all()
        return self.take()

    def _delta(self, delta: dict[str, Any]) -> None:
        thinking = _reasoning_text(delta)
        if thinking:
            self.text("thinking", thinking)
        content = delta.get("content")
        if isinstance(content, str):
            if content:
                self.text("text", content)
        elif isinstance(content, list):  # Mistral: typed parts
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "thinking":
                    text = _as_text(part.get("thinking"))
                    if text:
                        self.text("thinking", text)
                elif part.get("type") == "text" and isinstance(part.get("text"), str):
                    if part["text"]:
                        self.text("text", part["text"])
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self.text("text", refusal)
        calls = delta.get("tool_calls")
        for fragment in calls if isinstance(calls, list) else ():
            if isinstance(fragment, dict):
                self._tool_fragment(fragment)

    def _tool_fragment(self, fragment: dict[str, Any]) -> None:
        function = fragment.get("function")
        function = function if isinstance(function, dict) else {}
        call_id = _str(fragment.get("id"))
        name = _str(function.get("name"))
        arguments = function.get("arguments")
        if isinstance(arguments, (dict, list)):  # a few servers send parsed arguments
            arguments = json.dumps(arguments)
        args = arguments if isinstance(arguments, str) else ""

        position = fragment.get("index")
        key: Any = position if isinstance(position, int) else None
        at = self._calls.get(key) if key is not None else self._last_call
        block = self.blocks[at] if at is not None else None
        if block is not None and call_id and block.id and call_id != block.id:
            block = None  # a different call reusing the index (seen from some servers)
        if at is None or block is None or block.done:
            self.close_current()
            call_id = call_id or f"call_{uuid.uuid4().hex[:24]}"
            at = self.open("tool", id=call_id, name=name, announce=False)
            block = self.blocks[at]
            if key is not None:
                self._calls[key] = at
            self._last_call = at
        elif name and not block.name:
            block.name = name
        if args:
            self.add(at, args)
        if block.name:  # the start waits for the name: consumers never see a nameless call
            self.announce(at)

    def end(self) -> list[StreamEvent]:
        """The last events: any still-open blocks closed, then the complete message."""
        stop = self.stop_for(self.finish_reason, _STOPS)
        error = ErrorInfo(kind="content_filter", message=_FILTERED) if stop == "error" else None
        return self.closing(stop, self.usage, error)


# ---- helpers ----


def _usage(raw: dict[str, Any]) -> Usage:
    prompt_details = raw.get("prompt_tokens_details")
    prompt_details = prompt_details if isinstance(prompt_details, dict) else {}
    completion_details = raw.get("completion_tokens_details")
    completion_details = completion_details if isinstance(completion_details, dict) else {}
    return usage(
        count(raw, "prompt_tokens"),
        count(raw, "completion_tokens"),
        cache_read=count(prompt_details, "cached_tokens") or count(raw, "prompt_cache_hit_tokens"),
        cache_write=count(prompt_details, "cache_write_tokens"),  # OpenRouter
        reasoning=count(completion_details, "reasoning_tokens"),
        total=count(raw, "total_tokens"),
        cost=raw.get("cost"),  # OpenRouter, in USD
    )


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _is_reasoning_key(key: str) -> bool:
    lowered = key.lower()
    if "signature" in lowered:  # opaque tokens, not text
        return False
    return "reasoning" in lowered or "thinking" in lowered or "thought" in lowered


def _reasoning_text(delta: dict[str, Any]) -> str:
    keys = [key for key in _REASONING_FIELDS if key in delta]
    keys += sorted(
        key
        for key in delta
        if key not in _REASONING_FIELDS and key not in _STANDARD_FIELDS and _is_reasoning_key(key)
    )
    for key in keys:
        text = _as_text(delta[key])
        if text:
            return text
    return ""


def _as_text(value: Any) -> str:
    """Reasoning text from a string, a list of parts, or a part (``{"text": ...}``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_as_text(item) for item in value)
    if isinstance(value, dict):
        for key in ("text", "thinking", "summary", "content"):
            if key in value:
                return _as_text(value[key])
    return ""

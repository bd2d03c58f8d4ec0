"""A run as OpenAI Chat Completions: one ``chat.completion`` object, or its
``chat.completion.chunk`` stream. The run may take several turns (the agent's own tools run
on the server); the answer is the text of all of them, a blank line between messages, and
the calls of the client's tools (``tool_calls``, ``finish_reason: "tool_calls"``)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from ..agent import RunResult
from ..types import Usage
from ._translate import FrameData, PartsTranslator


def chat_usage(usage: Usage) -> dict[str, Any]:
    prompt = usage.input + usage.cache_read + usage.cache_write
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output,
        "total_tokens": prompt + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning},
    }


def finish_reason(result: RunResult[Any], calls: bool) -> str:
    if calls:
        return "tool_calls"
    return "length" if result.reason == "limit" else "stop"


class ChatTranslator(PartsTranslator):
    """treadle events → ``chat.completion.chunk`` objects; :meth:`completion` is the same
    answer as one object."""

    def __init__(self, model: str, external: frozenset[str]) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        super().__init__(self.id)
        self.model = model
        self.created = int(time.time())
        self.external = external
        self.content = ""
        self.calls: dict[str, dict[str, Any]] = {}  # the client's calls, by call id
        self._role_sent = False
        self._text_message = 0  # the message the text so far came from

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> FrameData:
        if not self._role_sent:
            delta = {"role": "assistant", **delta}
            self._role_sent = True
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            **extra,
        }

    def on_text_delta(self, part_id: str, text: str) -> None:
        if self.content and self._text_message != self.message_no:
            text = "\n\n" + text  # a later message of the run: a paragraph of its own
        self._text_message = self.message_no
        self.content += text
        self.out.append(self.chunk({"content": text}))

    def on_tool_input_start(self, call_id: str, name: str) -> None:
        if name not in self.external or call_id in self.calls:
            return
        call = {"index": len(self.calls), "id": call_id, "type": "function"}
        self.calls[call_id] = {**call, "function": {"name": name, "arguments": ""}}
        delta = {**call, "function": {"name": name, "arguments": ""}}
        self.out.append(self.chunk({"tool_calls": [delta]}))

    def on_tool_input_delta(self, call_id: str, arguments: str) -> None:
        call = self.calls.get(call_id)
        if call is None:
            return
        call["function"]["arguments"] += arguments
        delta = {"index": call["index"], "function": {"arguments": arguments}}
        self.out.append(self.chunk({"tool_calls": [delta]}))

    def finish(self, result: RunResult[Any], usage: Usage, include_usage: bool) -> list[FrameData]:
        """The stream's last chunks: the finish reason, then usage when asked for."""
        frames = [self.chunk({}, finish_reason(result, bool(self.calls)))]
        if include_usage:
            frames.append(
                {
                    "id": self.id,
                    "object": "chat.completion.chunk",
                    "created": self.created,
                    "model": self.model,
                    "choices": [],
                    "usage": chat_usage(usage),
                }
            )
        return frames

    def completion(self, result: RunResult[Any], usage: Usage) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": self.content or None,
            "refusal": None,
        }
        if self.calls:
            message["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": dict(c["function"])}
                for c in self.calls.values()
            ]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish_reason(result, bool(self.calls)),
                }
            ],
            "usage": chat_usage(usage),
        }

    def failure(self, message: str) -> list[FrameData]:
        return [{"error": {"message": message, "type": "server_error", "code": "run_failed"}}]


def sse_data(frame: FrameData) -> bytes:
    body = frame if isinstance(frame, str) else json.dumps(frame, ensure_ascii=False)
    return f"data: {body}\n\n".encode()

"""A run as an OpenAI Responses API ``response``: its output items and, when streamed, the
typed events that build them (``response.created`` ... ``response.completed``, each with its
``sequence_number``).

- The answer's text: a ``message`` item per assistant message.
- The agent's own tools, run on the server: an ``mcp_call`` item each (``server_label`` is
  the agent's name), added when the call starts and done with its ``output`` or ``error``.
- The client's tools: a ``function_call`` item each; the client answers with a
  ``function_call_output`` input item.
- A call the agent's hooks asked a person about (``Ask``): an ``mcp_approval_request`` item;
  the client answers with an ``mcp_approval_response`` input item naming its id.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from typing import Any

from ..agent import RunResult
from ..types import AgentEvent, ToolExecutionEnd, ToolExecutionStart, Usage
from ._translate import FrameData, PartsTranslator


def responses_usage(usage: Usage) -> dict[str, Any]:
    prompt = usage.input + usage.cache_read + usage.cache_write
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": usage.cache_read},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning},
        "total_tokens": prompt + usage.output,
    }


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


class ResponsesTranslator(PartsTranslator):
    """treadle events → Responses API stream events; :meth:`response` is the response
    object they build."""

    def __init__(self, model: str, server_label: str, external: frozenset[str]) -> None:
        self.id = _id("resp")
        super().__init__(self.id)
        self.model = model
        self.server_label = server_label
        self.external = external
        self.created = int(time.time())
        self.items: list[dict[str, Any]] = []
        self.sequence = 0
        self.approvals: dict[str, str] = {}  # approval requests made here: id -> call id
        self.approved: dict[str, str] = {}  # calls this request decides: call id -> request id
        self._open_text: dict[str, int] = {}  # part id -> output index
        self._calls: dict[str, int] = {}  # call id -> output index

    # ---- the events ----

    def event(self, kind: str, **fields: Any) -> FrameData:
        frame = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return frame

    def _emit(self, kind: str, **fields: Any) -> None:
        self.out.append(self.event(kind, **fields))

    def _add(self, item: dict[str, Any]) -> int:
        index = len(self.items)
        self.items.append(item)
        self._emit("response.output_item.added", output_index=index, item=copy.deepcopy(item))
        return index

    def _done(self, index: int) -> None:
        item = self.items[index]
        self._emit("response.output_item.done", output_index=index, item=copy.deepcopy(item))

    def response(self, status: str = "in_progress", **fields: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "model": self.model,
            "status": status,
            "output": copy.deepcopy(self.items),
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "text": {"format": {"type": "text"}},
            "usage": None,
            **fields,
        }

    def opening(self) -> list[FrameData]:
        start = self.response()
        return [
            self.event("response.created", response=start),
            self.event("response.in_progress", response=start),
        ]

    # ---- text ----

    def on_text_start(self, part_id: str) -> None:
        item: dict[str, Any] = {
            "id": _id("msg"),
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        index = self._add(item)
        self._open_text[part_id] = index
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        item["content"].append(part)
        self._emit(
            "response.content_part.added",
            item_id=item["id"],
            output_index=index,
            content_index=0,
            part=copy.deepcopy(part),
        )

    def on_text_delta(self, part_id: str, text: str) -> None:
        index = self._open_text[part_id]
        item = self.items[index]
        item["content"][0]["text"] += text
        self._emit(
            "response.output_text.delta",
            item_id=item["id"],
            output_index=index,
            content_index=0,
            delta=text,
            logprobs=[],
        )

    def on_text_end(self, part_id: str) -> None:
        index = self._open_text.pop(part_id)
        item = self.items[index]
        part = item["content"][0]
        fields = {"item_id": item["id"], "output_index": index, "content_index": 0}
        self._emit("response.output_text.done", **fields, text=part["text"], logprobs=[])
        self._emit("response.content_part.done", **fields, part=copy.deepcopy(part))
        item["status"] = "completed"
        self._done(index)

    # ---- the client's calls ----

    def on_tool_input_start(self, call_id: str, name: str) -> None:
        if name not in self.external or call_id in self._calls:
            return
        item = {
            "id": _id("fc"),
            "type": "function_call",
            "call_id": call_id,
            "name": name,
            "arguments": "",
            "status": "in_progress",
        }
        self._calls[call_id] = self._add(item)

    def on_tool_input_delta(self, call_id: str, arguments: str) -> None:
        index = self._calls.get(call_id)
        if index is None or self.items[index]["type"] != "function_call":
            return
        item = self.items[index]
        item["arguments"] += arguments
        self._emit(
            "response.function_call_arguments.delta",
            item_id=item["id"],
            output_index=index,
            delta=arguments,
        )

    def on_tool_input_end(self, call: Any) -> None:
        index = self._calls.get(call.id)
        if index is None or self.items[index]["type"] != "function_call":
            return
        item = self.items[index]
        item["status"] = "completed"
        self._emit(
            "response.function_call_arguments.done",
            item_id=item["id"],
            output_index=index,
            name=item["name"],
            arguments=item["arguments"],
        )
        self._done(index)

    # ---- the server's calls ----

    def translate(self, event: AgentEvent) -> list[FrameData]:
        if isinstance(event, ToolExecutionStart) and event.tool_name not in self.external:
            self.out = []
            self._call_started(event)
            return self.out
        if isinstance(event, ToolExecutionEnd) and event.tool_call_id in self._calls:
            self.out = []
            self._call_ended(event)
            return self.out
        return super().translate(event)

    def _call_started(self, event: ToolExecutionStart) -> None:
        approval = self.approved.get(event.tool_call_id)
        item = {
            "id": event.tool_call_id,
            "type": "mcp_call",
            "server_label": self.server_label,
            "name": event.tool_name,
            "arguments": json.dumps(event.args, ensure_ascii=False),
            "status": "in_progress",
            "output": None,
            "error": None,
            "approval_request_id": approval,
        }
        index = self._calls[event.tool_call_id] = self._add(item)
        self._emit("response.mcp_call.in_progress", item_id=item["id"], output_index=index)

    def _call_ended(self, event: ToolExecutionEnd) -> None:
        index = self._calls[event.tool_call_id]
        item = self.items[index]
        if item["type"] != "mcp_call":
            return
        text = "".join(getattr(b, "text", "") for b in event.result.content)
        if event.is_error:
            item["status"] = "failed"
            item["error"] = {"type": "mcp_tool_execution_error", "content": text}
            self._emit("response.mcp_call.failed", item_id=item["id"], output_index=index)
        else:
            item["status"] = "completed"
            item["output"] = text
            self._emit("response.mcp_call.completed", item_id=item["id"], output_index=index)
        self._done(index)

    def ask(self, call_id: str, name: str, arguments: dict[str, Any]) -> str:
        """An ``mcp_approval_request`` item for a call the run suspended on; its id."""
        request_id = _id("mcpr")
        self.approvals[request_id] = call_id
        index = self._add(
            {
                "id": request_id,
                "type": "mcp_approval_request",
                "server_label": self.server_label,
                "name": name,
                "arguments": json.dumps(arguments, ensure_ascii=False),
            }
        )
        self._done(index)
        return request_id

    # ---- the end ----

    def final(self, result: RunResult[Any], usage: Usage) -> dict[str, Any]:
        """The finished response: ``completed`` (also when it waits on the client's calls or
        on approvals), ``incomplete`` for a run that hit a limit, ``cancelled``, or
        ``failed`` with the error."""
        fields: dict[str, Any] = {"usage": responses_usage(usage)}
        if result.reason == "error":
            message = result.error.message if result.error else "the run failed"
            code = "server_error"
            return self.response("failed", error={"code": code, "message": message}, **fields)
        if result.reason == "limit":
            details = {"reason": "max_output_tokens"}
            return self.response("incomplete", incomplete_details=details, **fields)
        if result.reason == "cancelled":
            return self.response("cancelled", **fields)
        return self.response("completed", completed_at=int(time.time()), **fields)

    def closing(self, response: dict[str, Any]) -> list[FrameData]:
        kind = {"failed": "response.failed", "incomplete": "response.incomplete"}.get(
            response["status"], "response.completed"
        )
        return [self.event(kind, response=response)]

    def failure(self, message: str) -> list[FrameData]:
        failed = self.response("failed", error={"code": "server_error", "message": message})
        return [self.event("response.failed", response=failed)]


def sse_event(frame: FrameData) -> bytes:
    if isinstance(frame, str):
        return f"data: {frame}\n\n".encode()
    body = json.dumps(frame, ensure_ascii=False)
    return f"event: {frame['type']}\ndata: {body}\n\n".encode()

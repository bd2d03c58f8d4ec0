"""The walk both UI protocols make over treadle's events: which text, reasoning and tool-call
parts open, grow and close. A protocol subclasses :class:`PartsTranslator` and says what
frames each step becomes; the walk also sends, at ``message_end``, any part a provider did
not stream (so a client always ends up with the whole message)."""

from __future__ import annotations

import json
from typing import Any

from ..types import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    AssistantMessage,
    CustomEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResultMessage,
    TurnEnd,
    TurnStart,
)

FrameData = dict[str, Any] | str


class PartsTranslator:
    """Event → frames. Override the ``on_*`` methods; each appends to ``self.out``."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.out: list[FrameData] = []
        self.message_no = 0
        self.tool_names: dict[str, str] = {}
        self._open: tuple[str, str] | None = None  # ("text" | "reasoning", part id)
        self._text_parts: set[int] = set()
        self._reasoning_parts: set[int] = set()
        self._call_ids: dict[int, str] = {}
        self._args_sent: set[str] = set()
        self._calls_done: set[str] = set()

    # ---- what a protocol implements ----

    def on_run_start(self, event: AgentStart) -> None: ...
    def on_run_end(self, event: AgentEnd) -> None: ...
    def on_turn_start(self, event: TurnStart) -> None: ...
    def on_turn_end(self, event: TurnEnd) -> None: ...
    def on_message_start(self, message_id: str) -> None: ...
    def on_message_end(self, message_id: str, message: AssistantMessage) -> None: ...
    def on_text_start(self, part_id: str) -> None: ...
    def on_text_delta(self, part_id: str, text: str) -> None: ...
    def on_text_end(self, part_id: str) -> None: ...
    def on_reasoning_start(self, part_id: str) -> None: ...
    def on_reasoning_delta(self, part_id: str, text: str) -> None: ...
    def on_reasoning_end(self, part_id: str) -> None: ...
    def on_tool_input_start(self, call_id: str, name: str) -> None: ...
    def on_tool_input_delta(self, call_id: str, arguments: str) -> None: ...
    def on_tool_input_end(self, call: ToolCall) -> None: ...
    def on_tool_result(self, message: ToolResultMessage) -> None: ...
    def on_custom(self, event: CustomEvent) -> None: ...

    def failure(self, message: str) -> list[FrameData]:
        return []

    # ---- the walk ----

    @property
    def message_id(self) -> str:
        return f"{self.run_id}-{self.message_no}"

    def part_id(self, index: int) -> str:
        return f"{self.message_id}-{index}"

    def translate(self, event: AgentEvent) -> list[FrameData]:
        self.out = []
        if isinstance(event, MessageUpdate):
            self._delta(event)
        elif isinstance(event, MessageStart):
            if isinstance(event.message, AssistantMessage):
                self.message_no += 1
                self._text_parts.clear()
                self._reasoning_parts.clear()
                self._call_ids.clear()
                self.on_message_start(self.message_id)
        elif isinstance(event, MessageEnd):
            if isinstance(event.message, AssistantMessage):
                self._finish_message(event.message)
            elif isinstance(event.message, ToolResultMessage):
                self.on_tool_result(event.message)
        elif isinstance(event, TurnStart):
            self.on_turn_start(event)
        elif isinstance(event, TurnEnd):
            self.on_turn_end(event)
        elif isinstance(event, AgentStart):
            self.on_run_start(event)
        elif isinstance(event, AgentEnd):
            self._close()
            self.on_run_end(event)
        elif isinstance(event, CustomEvent):
            self.on_custom(event)
        return self.out

    def _delta(self, event: MessageUpdate) -> None:
        delta = event.delta
        if isinstance(delta, TextDelta):
            if delta.text:
                self._open_part("text", delta.index)
                self.on_text_delta(self.part_id(delta.index), delta.text)
        elif isinstance(delta, ThinkingDelta):
            if delta.text:
                self._open_part("reasoning", delta.index)
                self.on_reasoning_delta(self.part_id(delta.index), delta.text)
        elif isinstance(delta, ToolCallStart):
            self._close()
            self._start_call(delta.index, delta.id, delta.name)
        elif isinstance(delta, ToolCallDelta):
            call_id = self._call_ids.get(delta.index)
            if call_id is not None and delta.arguments:
                self._args_sent.add(call_id)
                self.on_tool_input_delta(call_id, delta.arguments)
        elif isinstance(delta, ToolCallEnd):
            self._end_call(delta.index, delta.tool_call)

    def _open_part(self, kind: str, index: int) -> None:
        part = (kind, self.part_id(index))
        if self._open == part:
            return
        self._close()
        self._open = part
        if kind == "text":
            self._text_parts.add(index)
            self.on_text_start(part[1])
        else:
            self._reasoning_parts.add(index)
            self.on_reasoning_start(part[1])

    def _close(self) -> None:
        if self._open is None:
            return
        kind, part_id = self._open
        self._open = None
        if kind == "text":
            self.on_text_end(part_id)
        else:
            self.on_reasoning_end(part_id)

    def _start_call(self, index: int, call_id: str, name: str) -> None:
        self._call_ids[index] = call_id
        self.tool_names[call_id] = name
        self.on_tool_input_start(call_id, name)

    def _end_call(self, index: int, call: ToolCall) -> None:
        if call.id in self._calls_done:
            return
        if call.id not in self._call_ids.values():
            self._close()
            self._start_call(index, call.id, call.name)
        if call.id not in self._args_sent:
            self._args_sent.add(call.id)
            self.on_tool_input_delta(call.id, json.dumps(call.arguments))
        self._calls_done.add(call.id)
        self.tool_names[call.id] = call.name
        self.on_tool_input_end(call)

    def _finish_message(self, message: AssistantMessage) -> None:
        self._close()
        for index, block in enumerate(message.content):
            if isinstance(block, TextContent) and block.text and index not in self._text_parts:
                self._open_part("text", index)
                self.on_text_delta(self.part_id(index), block.text)
                self._close()
            elif (
                isinstance(block, ThinkingContent)
                and block.thinking
                and index not in self._reasoning_parts
            ):
                self._open_part("reasoning", index)
                self.on_reasoning_delta(self.part_id(index), block.thinking)
                self._close()
            elif isinstance(block, ToolCall):
                self._end_call(index, block)
        self.on_message_end(self.message_id, message)

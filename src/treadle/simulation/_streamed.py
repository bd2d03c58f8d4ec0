"""The checks of one loop's streamed answers: INV-DELTAS (the deltas add up to the blocks)
and INV-CITED (a block's citations come with its end and stay)."""

from __future__ import annotations

from typing import Any

from ..types import AssistantMessage, MessageEnd, MessageStart, MessageUpdate, TextContent, ToolCall
from ._violations import require


def check_deltas(evs: list[Any]) -> None:
    """INV-DELTAS over one loop's events: per assistant message (start to end), the text
    and thinking deltas of each block add up to that block, update by update. A delta's
    index is the block's place in the message as it streamed; the closed message may have
    dropped tool calls that never completed, which moves the blocks after them up."""
    lid = evs[0].loop_id[:8]
    streamed: dict[int, str] | None = None
    partial: list[Any] = []  # the message as the last update had it
    for e in evs:
        if isinstance(e, MessageStart) and isinstance(e.message, AssistantMessage):
            streamed, partial = {}, []
        elif isinstance(e, MessageUpdate) and streamed is not None:
            partial = e.message.content
            delta = e.delta
            if delta.type not in ("text", "thinking"):
                continue
            so_far = streamed[delta.index] = streamed.get(delta.index, "") + delta.text
            block = partial[delta.index]
            held = getattr(block, "text" if delta.type == "text" else "thinking", None)
            require(
                held == so_far,
                "INV-DELTAS",
                f"update seq {e.seq}: block {delta.index} holds {held!r}, its deltas {so_far!r}"
                f" ({lid})",
            )
        elif isinstance(e, MessageEnd) and isinstance(e.message, AssistantMessage):
            if streamed is not None and e.message.stop_reason != "error":
                content = e.message.content
                kept = {c.id for c in content if isinstance(c, ToolCall)}
                places = [
                    i for i, b in enumerate(partial) if not isinstance(b, ToolCall) or b.id in kept
                ]
                for index, text in streamed.items():
                    at = places.index(index) if index in places else index
                    last = content[at] if at < len(content) else None
                    held = getattr(last, "text", None) or getattr(last, "thinking", None)
                    require(
                        held == text,
                        "INV-DELTAS",
                        f"message_end block {at} is {held!r}, its deltas {text!r} ({lid})",
                    )
            streamed = None


def check_citations(evs: list[Any]) -> None:
    """INV-CITED over one loop's events: per assistant message, once an update shows a text
    block cited, that block's text and citations never change again (no delta comes for
    it after its end), and the message at message_end holds the block as cited."""
    lid = evs[0].loop_id[:8]
    cited: dict[int, tuple[str, list[Any]]] | None = None  # block index -> (text, citations)
    for e in evs:
        if isinstance(e, MessageStart) and isinstance(e.message, AssistantMessage):
            cited = {}
        elif isinstance(e, MessageUpdate) and cited is not None:
            for index, block in enumerate(e.message.content):
                if not isinstance(block, TextContent):
                    continue
                if index in cited:
                    require(
                        (block.text, block.citations) == cited[index],
                        "INV-CITED",
                        f"update seq {e.seq}: cited block {index} changed after its end ({lid})",
                    )
                elif block.citations:
                    cited[index] = (block.text, block.citations)
        elif isinstance(e, MessageEnd) and isinstance(e.message, AssistantMessage):
            if cited and e.message.stop_reason != "error":
                final = [
                    (b.text, b.citations) for b in e.message.content if isinstance(b, TextContent)
                ]
                for index, whole in cited.items():
                    require(
                        whole in final,
                        "INV-CITED",
                        f"message_end lost block {index}'s citations ({lid})",
                    )
            cited = None

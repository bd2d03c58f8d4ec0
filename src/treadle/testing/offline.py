"""OfflineProvider: a clearly labelled stand-in model for demos and the CLI without a key."""

from __future__ import annotations

from ..providers.base import ModelRequest
from ..types import AssistantMessage, FileContent, TextContent, ToolResultMessage, UserMessage
from .scripted import ScriptedProvider, ScriptItem


def _reply(request: ModelRequest) -> AssistantMessage:
    last = request.messages[-1] if request.messages else None
    if isinstance(last, ToolResultMessage):
        results = [m.text for m in request.messages[-8:] if isinstance(m, ToolResultMessage)]
        text = "(offline model) The tools returned: " + "; ".join(results)
    else:
        said = last.text if isinstance(last, UserMessage) else ""
        blocks = last.content if isinstance(last, UserMessage) else []
        files = [b for b in blocks if isinstance(b, FileContent)]
        attached = "".join(
            f" You attached {f.name or 'a file'} ({f.mime_type}"
            + (f", {f.size} bytes)." if f.size is not None else ").")
            for f in files
        )
        text = (
            f"(offline model) You said: {said!r}.{attached} I am not a real model: set "
            "TREADLE_MODEL (for example openai:gpt-4o-mini or ollama:llama3.2) to talk to one."
        )
    return AssistantMessage(content=[TextContent(text=text)])


class OfflineProvider(ScriptedProvider):
    """Answers every request with a labelled echo; never needs a network or a key."""

    def __init__(self, *, delay: float = 0.005) -> None:
        super().__init__([], name="offline", model="offline-echo", chunks=6, delay=delay)

    @property
    def remaining(self) -> int:
        return 1

    def _next_item(self) -> ScriptItem:
        return _reply

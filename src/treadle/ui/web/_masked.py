"""What the web app streams of a run, masked once at its source: the chat's frames and the
inspector's events. Every reader is then sent the same bytes (the guard passes them as they
are, see ``MASKED_HEADER``), and a secret a model streams in two deltas is masked too: each
streamed part (a text, a reasoning, a call's arguments) goes through its own
:class:`~treadle.ui._mask.StreamMask`, which holds back a tail that could begin a secret
until the next delta (or the part's end) shows whether it does."""

from __future__ import annotations

import json
from typing import Any

from ...types import AgentEvent, MessageEnd, MessageStart, MessageUpdate
from .._mask import Secrets, StreamMask
from .._runs import Translator
from ._history import event_json

FrameData = dict[str, Any] | str

# stream part -> (the field naming the part, the field holding the delta)
_DELTAS = {
    "text-delta": ("id", "delta"),
    "reasoning-delta": ("id", "delta"),
    "tool-input-delta": ("toolCallId", "inputTextDelta"),
}
# a part's end -> the delta type it ends
_ENDS = {
    "text-end": "text-delta",
    "reasoning-end": "reasoning-delta",
    "tool-input-available": "tool-input-delta",
    "tool-input-error": "tool-input-delta",
}
# frames that may come while a part streams on (any other frame ends every open part)
_WHILE_STREAMING = {"start", "start-step", "text-start", "reasoning-start", "tool-input-start"}


class MaskedTranslator:
    """A UI message stream translator whose frames have the secrets masked, those split
    across a part's deltas included."""

    def __init__(self, inner: Translator, secrets: Secrets) -> None:
        self.inner = inner
        self.secrets = secrets
        self._open: dict[tuple[str, str], StreamMask[str]] = {}

    def translate(self, event: AgentEvent) -> list[FrameData]:
        return self._mask(self.inner.translate(event))

    def failure(self, message: str) -> list[FrameData]:
        return self._mask(self.inner.failure(message))

    def _mask(self, frames: list[FrameData]) -> list[FrameData]:
        out: list[FrameData] = []
        for frame in frames:
            kind = frame.get("type") if isinstance(frame, dict) else None
            if isinstance(frame, dict) and isinstance(kind, str) and kind in _DELTAS:
                name, field = _DELTAS[kind]
                part = str(frame.get(name))
                stream = self._open.setdefault((kind, part), self.secrets.text_stream())
                text = stream.feed(str(frame.get(field, "")))
                if text:
                    out.append({**self.secrets.mask_value(frame), field: text})
                continue
            if kind in _ENDS:
                assert isinstance(frame, dict)
                delta = _ENDS[str(kind)]
                out += self._close(delta, str(frame.get(_DELTAS[delta][0])))
            elif kind not in _WHILE_STREAMING:
                for delta, part in list(self._open):
                    out += self._close(delta, part)
            out.append(self.secrets.mask_value(frame))
        return out

    def _close(self, delta: str, part: str) -> list[FrameData]:
        """The end of a part's deltas: what its mask held back, as one last delta."""
        stream = self._open.pop((delta, part), None)
        rest = stream.flush() if stream is not None else ""
        if not rest:
            return []
        name, field = _DELTAS[delta]
        return [{"type": delta, name: part, field: rest}]


class InspectorEncoder:
    """Encodes one run's events for the inspector, each once and in order, as an SSE frame
    of JSON (a ``message_update`` with its delta only). A lone surrogate becomes U+FFFD, so
    the frame is always valid UTF-8 and JSON; the secrets are masked, those split across
    deltas included (what a delta's mask still holds when its message ends is left out:
    the ``message_end`` carries the whole message, masked)."""

    def __init__(self, secrets: Secrets) -> None:
        self.secrets = secrets
        self._streams: dict[tuple[str, str, int], StreamMask[str]] = {}

    def __call__(self, event: AgentEvent) -> bytes:
        try:
            data = event_json(event)
        except Exception:  # a custom event's value that is no JSON: say so, go on
            data = {
                "type": event.type,
                "seq": event.seq,
                "loop_id": event.loop_id,
                "depth": event.depth,
                "timestamp": event.timestamp,
                "unencodable": "this event's content could not be written as JSON",
            }
        if isinstance(event, MessageUpdate) and self.secrets:
            delta = data["delta"]
            field = "text" if "text" in delta else "arguments" if "arguments" in delta else None
            if field is not None:
                key = (event.loop_id, str(delta.get("type")), int(delta.get("index", 0)))
                stream = self._streams.setdefault(key, self.secrets.text_stream())
                delta[field] = stream.feed(str(delta[field]))
        elif isinstance(event, (MessageStart, MessageEnd)):
            for key in [k for k in self._streams if k[0] == event.loop_id]:
                del self._streams[key]
        body = _valid_unicode(json.dumps(data, ensure_ascii=False))
        return self.secrets.mask_bytes(f"id: {event.seq}\ndata: {body}\n\n".encode())


def _valid_unicode(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (it cannot be sent as UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text

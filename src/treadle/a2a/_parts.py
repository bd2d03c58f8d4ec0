"""A2A message parts to and from treadle: a client's message as a prompt, the calls a run
waits on as an ``input-required`` message, and a client's answer to them as decisions.

What a client answers is data, never authority (docs/contract.md §7.16): an answer is read
only against the calls the server's own run suspended on (``waiting``), and anything
naming another call is refused with what the server waits on.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from a2a.types import Message, Part, Role
from google.protobuf import json_format, struct_pb2

from ..errors import ConfigurationError, TreadleError
from ..loop import Suspension
from ..types import ImageContent, UserMessage

APPROVE_WORDS = frozenset({"approve", "approved", "yes", "y", "allow", "ok"})
DENY_WORDS = frozenset({"deny", "denied", "no", "n", "reject", "refuse"})


def data_of(part: Part) -> Any:
    """A data part's value as plain Python (a dict, a list, a number ...)."""
    return json_format.MessageToDict(part.data)


def data_part(value: Any) -> Part:
    """A data part holding ``value`` (anything JSON can hold)."""
    proto = struct_pb2.Value()
    json_format.ParseDict(json.loads(json.dumps(value, default=str)), proto)
    return Part(data=proto, media_type="application/json")


def text_part(text: str) -> Part:
    return Part(text=text, media_type="text/plain")


def agent_message(parts: list[Part], *, task_id: str, context_id: str, message_id: str) -> Message:
    return Message(
        message_id=message_id,
        role=Role.ROLE_AGENT,
        parts=parts,
        task_id=task_id,
        context_id=context_id,
    )


def prompt_of(message: Message) -> UserMessage:
    """A client's message as the user's turn: its text, data parts as JSON, images (raw
    bytes with an ``image/*`` type) as images, other files and links named in the text."""
    texts: list[str] = []
    images: list[ImageContent] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            texts.append(json.dumps(data_of(part), ensure_ascii=False))
        elif kind == "raw":
            media = part.media_type or "application/octet-stream"
            if media.startswith("image/"):
                try:
                    images.append(ImageContent.from_bytes(bytes(part.raw), media))
                    continue
                except ConfigurationError:
                    pass
            name = part.filename or "a file"
            texts.append(f"[{name} ({media}, {len(part.raw)} bytes) was attached]")
        elif kind == "url":
            texts.append(f"[{part.filename or 'file'}: {part.url}]")
    return UserMessage.of("\n\n".join(t for t in texts if t), *images)


def describe_waiting(waiting: Mapping[str, Suspension]) -> list[Part]:
    """The ``input-required`` message of a run that suspended: a sentence per call, then
    one data part per call (``type`` ``approval`` or ``question``, the call's id, tool and
    arguments) that a client program reads."""
    lines: list[str] = []
    data: list[Part] = []
    for call_id, record in waiting.items():
        arguments = json.dumps(record.arguments, ensure_ascii=False)
        if record.external:
            lines.append(
                f"{record.prompt or 'A question'}: {record.name}({arguments}). "
                'Answer with text (or a data part {"answer": ...}).'
            )
            kind = "question"
        else:
            ask = f"{record.prompt}: " if record.prompt else "Approval needed: "
            lines.append(
                f"{ask}{record.name}({arguments}). Answer with a data part "
                '{"approved": true} or {"approved": false} (or the text approve / deny).'
            )
            kind = "approval"
        entry: dict[str, Any] = {
            "type": kind,
            "tool_call_id": call_id,
            "tool": record.name,
            "arguments": record.arguments,
        }
        if record.prompt:
            entry["prompt"] = record.prompt
        data.append(data_part(entry))
    return [text_part("\n".join(lines)), *data]


@dataclass
class Answer:
    """What a client's message decides: approvals and denials (by call id, with the new
    arguments or the reason), and answers to questions (by call id)."""

    approve: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    deny: dict[str, str] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.approve or self.deny or self.answers)


class AnswerRefused(TreadleError, ValueError):
    """A message that decides a call the server is not waiting on, or nothing at all."""


def read_answer(message: Message, waiting: Mapping[str, Suspension]) -> Answer:
    """A client's answer to the calls the server waits on (``waiting``: id → what its run
    suspended on). A data part ``{"approved": bool}`` decides every approval (or the one
    its ``tool_call_id`` names; ``reason`` for a denial, ``arguments`` for new ones, which
    the hooks judge again); the text ``approve`` / ``deny`` does the same; ``{"answer":
    ...}`` or any other text answers the question waiting (the one named, or the only
    one). Raises :class:`AnswerRefused` for a call not waiting, or a message deciding
    nothing."""
    approvals = [c for c, r in waiting.items() if not r.external]
    questions = [c for c, r in waiting.items() if r.external]
    answer = Answer()

    def targets(named: Any, pool: list[str], what: str) -> list[str]:
        if named is None:
            if not pool:
                raise AnswerRefused(f"no {what} is pending{_pending(waiting)}")
            return pool
        if not isinstance(named, str) or named not in pool:
            raise AnswerRefused(f"no {what} is pending for tool call {named!r}{_pending(waiting)}")
        return [named]

    def decide(approved: bool, named: Any, reason: Any, arguments: Any) -> None:
        for call_id in targets(named, approvals, "approval"):
            if approved:
                new = arguments if isinstance(arguments, dict) else None
                answer.approve[call_id] = new
            else:
                answer.deny[call_id] = (
                    reason if isinstance(reason, str) and reason else "The client denied it."
                )

    def reply(text: str, named: Any) -> None:
        if named is None and len(questions) > 1:
            raise AnswerRefused(
                "several questions are pending: answer each with a data part "
                f'{{"tool_call_id": ..., "answer": ...}}{_pending(waiting)}'
            )
        for call_id in targets(named, questions, "question"):
            answer.answers[call_id] = text

    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "data":
            value = data_of(part)
            if not isinstance(value, dict):
                raise AnswerRefused("a data part answering a task must be an object")
            named = value.get("tool_call_id")
            if "approved" in value:
                if not isinstance(value["approved"], bool):
                    raise AnswerRefused('"approved" must be true or false')
                decide(value["approved"], named, value.get("reason"), value.get("arguments"))
            elif "answer" in value:
                given = value["answer"]
                reply(given if isinstance(given, str) else json.dumps(given), named)
            else:
                raise AnswerRefused(
                    'a data part answering a task holds "approved" (true or false) or "answer"'
                )
        elif kind == "text":
            text = part.text.strip()
            word = text.lower().rstrip(".!")
            if approvals and word in APPROVE_WORDS | DENY_WORDS:
                decide(word in APPROVE_WORDS, None, None, None)
            elif text:
                reply(text, None)
    if not answer:
        raise AnswerRefused(f"the message decides nothing{_pending(waiting)}")
    return answer


def _pending(waiting: Mapping[str, Suspension]) -> str:
    named = ", ".join(f"{c!r} ({r.name})" for c, r in waiting.items()) or "none"
    return f" (the task waits on: {named})"


def file_part(data: bytes, media_type: str, filename: str | None = None) -> Part:
    """A file as a part (an image a tool returned, say)."""
    return Part(raw=data, media_type=media_type, filename=filename or "")


def image_part(image: ImageContent) -> Part:
    return file_part(base64.b64decode(image.data), image.mime_type)

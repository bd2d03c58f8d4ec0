"""What the A2A tests share: the token, its header, a user message."""

from __future__ import annotations

import uuid

from a2a.types import Message, Part, Role, SendMessageRequest

TOKEN = "a2a-test-token-4242"


def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def user_message(
    *parts: Part, text: str | None = None, task_id: str = "", context_id: str = ""
) -> SendMessageRequest:
    all_parts = [*parts, *([Part(text=text)] if text is not None else [])]
    return SendMessageRequest(
        message=Message(
            message_id=uuid.uuid4().hex,
            role=Role.ROLE_USER,
            parts=all_parts,
            task_id=task_id,
            context_id=context_id,
        )
    )

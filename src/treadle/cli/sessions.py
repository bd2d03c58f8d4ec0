"""``treadle sessions list|show|delete``: stored conversations, for a person to read."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import TYPE_CHECKING

from .setup import count

if TYPE_CHECKING:
    from ..sessions import SessionStore


def open_session_store(path: str | None) -> SessionStore:
    """``--store PATH``, else ``$TREADLE_SESSIONS``, else ``~/.treadle/sessions.db``."""
    from ..sessions import open_store

    return open_store(path)


def resolve_session(store: SessionStore, text: str) -> str:
    """A session id, or an unambiguous prefix of one."""
    from ..sessions import SessionNotFound

    if store.exists(text):
        return text
    matches = [info.id for info in store.list() if info.id.startswith(text)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise SessionNotFound(f"{text!r} matches {len(matches)} sessions; give more of the id")
    raise SessionNotFound(f"no session {text!r}")


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M")


def _one_line(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def cmd_sessions(args: argparse.Namespace) -> int:
    from ..types import AssistantMessage, ExtensionMessage, ToolResultMessage

    store = open_session_store(args.store)
    try:
        if args.action == "list":
            infos = store.list(limit=args.limit or None)
            if not infos:
                print(f"no sessions in {store!r}")
            for info in infos:
                branch = f"  ⑂ {info.parent_id[:8]}@{info.branch_index}" if info.parent_id else ""
                title = _one_line(info.title or "(untitled)", 60)
                print(
                    f"{info.id}  {_when(info.updated_at)}  {info.message_count:>4} msgs  "
                    f"{title}{branch}"
                )
            return 0
        session_id = resolve_session(store, args.id)
        if args.action == "delete":
            store.delete(session_id)
            print(f"deleted {session_id}")
            return 0
        loaded = store.load(session_id)
        info = loaded.info
        print(f"session {info.id}")
        print(f"  title:   {info.title or '(untitled)'}")
        print(f"  created: {_when(info.created_at)}   updated: {_when(info.updated_at)}")
        if info.parent_id:
            print(f"  branched from {info.parent_id} at message {info.branch_index}")
        if loaded.repaired_tool_calls:
            calls = count(len(loaded.repaired_tool_calls), "unanswered tool call")
            print(f"  {calls} shown Cancelled")
        if loaded.pending_tool_calls:
            print(f"  waiting for approval: {', '.join(loaded.pending_tool_calls)}")
        for index, message in enumerate(loaded.messages):
            if isinstance(message, ExtensionMessage):
                print(f"[{index}] extension {message.kind}")
                continue
            label: str = message.role
            if isinstance(message, ToolResultMessage):
                error = " (error)" if message.is_error else ""
                label = f"tool_result {message.tool_name}{error}"
            print(f"[{index}] {label}: {message.text}")
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls:
                    arguments = call.raw_arguments or json.dumps(call.arguments)
                    print(f"      → {call.name}({_one_line(arguments, 100)})  [{call.id}]")
                if message.error is not None:
                    print(f"      ! {message.error.kind}: {message.error.message}")
        return 0
    finally:
        store.close()

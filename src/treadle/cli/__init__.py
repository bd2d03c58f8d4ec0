"""The ``treadle`` command: ``treadle run "prompt"``, ``treadle chat`` (stored sessions,
``--resume ID``) and ``treadle sessions list|show|delete``."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio

from ..providers.base import Provider, ProviderError
from .render import Renderer, make_renderer

if TYPE_CHECKING:
    from ..sessions import SessionStore

DEFAULT_MODELS = (
    ("OPENAI_API_KEY", "openai:gpt-4o-mini"),
    ("ANTHROPIC_API_KEY", "anthropic:claude-sonnet-4-5"),
    ("GEMINI_API_KEY", "gemini:gemini-2.5-flash"),
    ("GOOGLE_API_KEY", "gemini:gemini-2.5-flash"),
)
HOW_TO = (
    "No model configured. Pass --model (or set TREADLE_MODEL), e.g. openai:gpt-4o-mini with "
    "OPENAI_API_KEY, anthropic:claude-sonnet-4-5 with ANTHROPIC_API_KEY, ollama:llama3.2, or "
    "openai-compatible:MODEL@http://localhost:8000/v1. Using the offline model for now."
)


def resolve_model(spec: str | None, err: Any = None) -> tuple[Provider, str]:
    """(provider, label) for --model / TREADLE_MODEL / a key in the environment / offline."""
    err = err or sys.stderr
    spec = spec or os.environ.get("TREADLE_MODEL")
    if not spec:
        spec = next((model for var, model in DEFAULT_MODELS if os.environ.get(var)), None)
    if not spec or spec == "offline":
        from ..testing import OfflineProvider

        if spec != "offline":
            print(HOW_TO, file=err)
        return OfflineProvider(), "offline"
    from ..providers.registry import get_provider

    return get_provider(spec), spec


def load_tools(specs: Sequence[str]) -> list[Any]:
    """Tools named ``package.module:attribute`` (a function, a Tool, or a list of them)."""
    tools: list[Any] = []
    for spec in specs:
        module_name, _, attr = spec.partition(":")
        if not attr:
            raise SystemExit(f"--tool {spec!r}: use the form package.module:function")
        try:
            value = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            print(f"treadle: --tool {spec!r}: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        tools.extend(value if isinstance(value, (list, tuple)) else [value])
    return tools


async def _run_once(agent: Any, prompt: str, renderer: Renderer) -> Any:
    async with agent.stream(prompt) as events:
        async for event in events:
            renderer.event(event)
    return events.result


async def cmd_run(args: argparse.Namespace) -> int:
    from ..agent import Agent

    provider, label = resolve_model(args.model)
    agent: Agent[Any] = Agent(provider, tools=load_tools(args.tool), system_prompt=args.system)
    renderer = make_renderer()
    result = await _run_once(agent, args.prompt, renderer)
    if args.usage:
        renderer.status(agent.usage, label)
    return 0 if result is not None and result.reason == "completed" else 1


CHAT_HELP = (
    "/model NAME  switch model · /reset  new conversation · /session · /branch N · "
    "/continue · /compact · /usage · /quit"
)


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


async def cmd_chat(args: argparse.Namespace) -> int:
    from ..agent import Agent

    provider, label = resolve_model(args.model)
    if args.resume and args.no_store:
        raise SystemExit("--resume needs a store; drop --no-store")
    store = None if args.no_store else open_session_store(args.store)
    try:
        session_id = resolve_session(store, args.resume) if store and args.resume else None
        agent: Agent[Any] = Agent(
            provider,
            tools=load_tools(args.tool),
            system_prompt=args.system,
            store=store,
            session_id=session_id,
        )
    except BaseException:
        if store is not None:
            store.close()
        raise
    chat = _Chat(agent, store, label)
    print(f"treadle chat · {label} · {CHAT_HELP}")
    if store is not None and session_id is not None:
        print(f"(resumed session {agent.session_id}: {len(agent.messages)} messages)")
        if agent.messages and agent.messages[-1].role != "assistant":
            print("(its last turn was cut short: /continue picks it up)")
    elif store is not None:
        print(f"(session {agent.session_id})")
    try:
        return await chat.loop()
    finally:
        chat.close()


class _Chat:
    """The REPL's state: the agent (replaced by /branch), its store, the model label."""

    def __init__(self, agent: Any, store: SessionStore | None, label: str) -> None:
        self.agent = agent
        self.store = store
        self.label = label
        self.renderer = make_renderer()

    def _drop_if_empty(self, session_id: str) -> None:
        """A conversation that never got a message leaves nothing behind."""
        if self.store is None:
            return
        try:
            if self.store.info(session_id).message_count == 0:
                self.store.delete(session_id)
        except Exception:
            pass

    def close(self) -> None:
        self.agent.close()
        self._drop_if_empty(self.agent.session_id)
        if self.store is not None:
            self.store.close()

    async def loop(self) -> int:
        while True:
            try:
                line = await anyio.to_thread.run_sync(input, "you> ")
            except (EOFError, KeyboardInterrupt):
                print()
                return 0
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                command, _, rest = line.partition(" ")
                if command in ("/quit", "/exit"):
                    return 0
                await self.command(command, rest.strip())
                continue
            try:
                await _run_once(self.agent, line, self.renderer)
            except KeyboardInterrupt:
                self.agent.abort()
            self.renderer.status(self.agent.usage, self.label)

    async def command(self, command: str, rest: str) -> None:
        agent = self.agent
        if command == "/reset":
            previous = agent.session_id
            agent.reset()
            self._drop_if_empty(previous)
            stored = f" (session {agent.session_id})" if self.store is not None else ""
            print(f"(new conversation){stored}")
        elif command == "/session":
            where = f" in {self.store!r}" if self.store is not None else " (not stored)"
            print(f"session {agent.session_id}{where}: {len(agent.messages)} messages")
        elif command == "/branch":
            try:
                branched = agent.branch(int(rest) if rest else None)
            except (ValueError, IndexError) as exc:
                print(f"cannot branch: {exc}")
                return
            agent.close()
            self.agent = branched
            print(f"(branched: session {branched.session_id}, {len(branched.messages)} messages)")
        elif command == "/continue":
            if not agent.messages or agent.messages[-1].role == "assistant":
                print("(nothing to continue)")
                return
            result = await agent.continue_()
            print(result.text or f"({result.reason})")
        elif command == "/usage":
            self.renderer.status(agent.usage, self.label)
        elif command == "/compact":
            before = len(agent.messages)
            result = await agent.compact()
            if result is None:
                print("(compaction skipped by a hook)")
            elif not result.changed:
                print("(nothing to compact: the conversation is already short; no model call)")
            else:
                print(
                    f"(compacted: {before} -> {len(agent.messages)} messages, "
                    f"~{result.tokens_before} -> ~{result.tokens_after} tokens)"
                )
        elif command == "/model":
            if not rest:
                print(f"model: {self.label}")
                return
            try:
                provider, label = resolve_model(rest)
            except (ValueError, ProviderError) as exc:
                print(f"cannot use {rest!r}: {exc}")
                return
            agent.provider = provider
            self.label = label
            print(f"(model: {label})")
        else:
            print(CHAT_HELP)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="treadle", description="Run an agent from the shell.")
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--model", "-m", help="provider:model, e.g. openai:gpt-4o-mini, offline")
    common.add_argument("--system", "-s", help="system prompt")
    common.add_argument(
        "--tool", "-t", action="append", default=[], help="a tool as package.module:function"
    )
    run = sub.add_parser("run", parents=[common], help="answer one prompt, streaming")
    run.add_argument("prompt")
    run.add_argument("--usage", action="store_true", help="print token usage at the end")
    store_help = "session store: a .db file (SQLite) or a directory (JSONL); default "
    store_help += "$TREADLE_SESSIONS or ~/.treadle/sessions.db"
    chat = sub.add_parser("chat", parents=[common], help="an interactive conversation (stored)")
    chat.add_argument("--store", help=store_help)
    chat.add_argument("--resume", "-r", metavar="ID", help="go on with a stored session")
    chat.add_argument("--no-store", action="store_true", help="keep the conversation in memory")

    sessions = sub.add_parser("sessions", help="list, show or delete stored conversations")
    actions = sessions.add_subparsers(dest="action", required=True)
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--store", help=store_help)
    listing = actions.add_parser("list", parents=[where], help="newest first")
    listing.add_argument("--limit", "-n", type=int, default=20, help="how many (0: all)")
    show = actions.add_parser("show", parents=[where], help="print a conversation")
    show.add_argument("id", help="a session id or an unambiguous prefix")
    delete = actions.add_parser("delete", parents=[where], help="remove a conversation")
    delete.add_argument("id", help="a session id or an unambiguous prefix")
    return parser


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
            print(f"  {len(loaded.repaired_tool_calls)} unanswered tool call(s) shown Cancelled")
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


def main(argv: Sequence[str] | None = None) -> int:
    from ..sessions import SessionError

    args = build_parser().parse_args(argv)
    try:
        if args.command == "sessions":
            return cmd_sessions(args)
        handler = cmd_run if args.command == "run" else cmd_chat
        return anyio.run(handler, args)
    except ProviderError as exc:
        print(f"treadle: {exc}", file=sys.stderr)
        return 2
    except SessionError as exc:
        print(f"treadle: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"treadle: {exc}", file=sys.stderr)
        return 2

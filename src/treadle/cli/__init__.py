"""The ``treadle`` command: ``treadle run "prompt"``, ``treadle chat`` (stored sessions,
``--resume ID``), ``treadle sessions list|show|delete``, ``treadle ui`` (a web app) and
``treadle serve`` (agents served over the OpenAI API, MCP and A2A), ``treadle eval`` (a
dataset scored, ``treadle.evals``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import anyio
from anyio.from_thread import start_blocking_portal

from .. import __version__
from ..providers.base import ProviderError
from .chat import CHAT_HELP, Chat
from .files import check_for, prompt_with, read_files
from .render import Renderer, make_renderer
from .sessions import cmd_sessions, open_session_store, resolve_session
from .setup import _NoModel, count, load_tools, resolve_model

__all__ = ["main", "resolve_model"]


async def _run_once(agent: Any, prompt: Any, renderer: Renderer) -> Any:
    async with agent.stream(prompt) as events:
        async for event in events:
            renderer.event(event)
    return events.result


def _prompt(text: str) -> str:
    if text != "-":
        return text
    read = sys.stdin.read().strip()
    if not read:
        raise SystemExit("treadle run -: standard input was empty; give the prompt there")
    return read


async def cmd_run(args: argparse.Namespace) -> int:
    from ..agent import Agent

    files = read_files(args.file)  # a missing or unreadable file stops here, before a model
    prompt = _prompt(args.prompt)
    provider, label = resolve_model(
        args.model, api_key=args.api_key, base_url=args.base_url, require=True
    )
    check_for(provider, files)  # one the model cannot take: before any request
    agent: Agent[Any] = Agent(provider, tools=load_tools(args.tool), system_prompt=args.system)
    renderer = make_renderer()
    try:
        result = await _run_once(agent, prompt_with(prompt, files), renderer)
    finally:
        await agent.aclose()
    if args.usage:
        renderer.status(agent.usage, label)
    return 0 if result.reason == "completed" else 1


def cmd_chat(args: argparse.Namespace) -> int:
    from ..agent import Agent

    provider, label = resolve_model(args.model, api_key=args.api_key, base_url=args.base_url)
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
    with start_blocking_portal() as portal:
        chat = Chat(agent, store, label, portal)
        print(f"treadle chat · {label} · {CHAT_HELP}")
        if store is not None and session_id is not None:
            print(f"(resumed session {agent.session_id}: {count(len(agent.messages), 'message')})")
            chat.show_last_exchange()
            if agent.messages and agent.messages[-1].role != "assistant":
                print("(its last turn was cut short: /continue picks it up)")
        elif store is not None:
            print(f"(session {agent.session_id})")
        try:
            return chat.loop()
        finally:
            chat.close()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="treadle", description="Run an agent from the shell.")
    parser.add_argument("--version", action="version", version=f"treadle {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--model", "-m", help="provider:model, e.g. openai:gpt-4o-mini, offline")
    common.add_argument("--system", "-s", help="system prompt")
    common.add_argument(
        "--tool", "-t", action="append", default=[], help="a tool as package.module:function"
    )
    common.add_argument("--api-key", help="the provider's API key (else its environment variable)")
    common.add_argument("--base-url", help="the provider's base URL (a proxy, a local server)")
    run = sub.add_parser("run", parents=[common], help="answer one prompt, streaming")
    run.add_argument("prompt", help="the prompt, or - to read it from standard input")
    run.add_argument("--usage", action="store_true", help="print token usage at the end")
    run.add_argument(
        "--file",
        "-f",
        action="append",
        default=[],
        metavar="PATH",
        help="attach a file to the prompt (a PDF, text, CSV, audio, an image); repeatable",
    )
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
    from .evals import add_parser as add_eval
    from .ui import add_parser as add_ui

    add_ui(sub, common)
    from .serve import add_parser as add_serve

    add_serve(sub)
    add_eval(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from ..sessions import SessionError

    args = build_parser().parse_args(argv)
    try:
        if args.command == "sessions":
            return cmd_sessions(args)
        if args.command == "chat":
            return cmd_chat(args)
        if args.command == "ui":
            from .ui import cmd_ui

            return cmd_ui(args)
        if args.command == "serve":
            from .serve import cmd_serve

            return cmd_serve(args)
        if args.command == "eval":
            from .evals import cmd_eval

            return cmd_eval(args)
        return anyio.run(cmd_run, args)
    except KeyboardInterrupt:
        print("\ntreadle: interrupted", file=sys.stderr)
        return 130
    except _NoModel as exc:
        print(f"treadle: {exc}", file=sys.stderr)
        return 2
    except ProviderError as exc:
        hint = " (on the command line: --api-key)" if exc.kind == "auth" else ""
        print(f"treadle: {exc}{hint}", file=sys.stderr)
        return 2
    except SessionError as exc:
        print(f"treadle: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"treadle: {exc}", file=sys.stderr)
        return 2

"""The ``treadle`` command: ``treadle run "prompt"`` and ``treadle chat``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import anyio

from ..providers.base import Provider, ProviderError
from .render import Renderer, make_renderer

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
        value = getattr(importlib.import_module(module_name), attr)
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


CHAT_HELP = "/model NAME  switch model · /reset  new conversation · /usage · /quit"


async def cmd_chat(args: argparse.Namespace) -> int:
    from ..agent import Agent

    provider, label = resolve_model(args.model)
    agent: Agent[Any] = Agent(provider, tools=load_tools(args.tool), system_prompt=args.system)
    renderer = make_renderer()
    print(f"treadle chat · {label} · {CHAT_HELP}")
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
            if command == "/reset":
                agent.reset()
                print("(new conversation)")
            elif command == "/usage":
                renderer.status(agent.usage, label)
            elif command == "/model":
                if not rest.strip():
                    print(f"model: {label}")
                    continue
                try:
                    new_provider, new_label = resolve_model(rest.strip())
                except (ValueError, ProviderError) as exc:
                    print(f"cannot use {rest.strip()!r}: {exc}")
                    continue
                agent.provider = new_provider
                provider, label = new_provider, new_label
                print(f"(model: {label})")
            else:
                print(CHAT_HELP)
            continue
        try:
            await _run_once(agent, line, renderer)
        except KeyboardInterrupt:
            agent.abort()
        renderer.status(agent.usage, label)


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
    sub.add_parser("chat", parents=[common], help="an interactive conversation")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = cmd_run if args.command == "run" else cmd_chat
    try:
        return anyio.run(handler, args)
    except ProviderError as exc:
        print(f"treadle: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"treadle: {exc}", file=sys.stderr)
        return 2

"""``treadle ui [module:agent]``: serve an agent as a local web app (extra ``web``)."""

from __future__ import annotations

import argparse
import importlib
import ipaddress
import os
import sys
from typing import Any

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def load_agent(target: str, command: str = "treadle ui") -> Any:
    """``module:attribute`` (dots for nested attributes), found as uvicorn finds apps: the
    current directory is importable. A callable that is not an Agent is called (a factory).
    ``command`` names the command in the errors."""
    from ..agent import Agent

    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise SystemExit(f"{command} {target!r}: use the form module:agent (e.g. app:agent)")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
        for name in attr.split("."):
            value = getattr(value, name)
    except (ImportError, AttributeError) as exc:
        raise SystemExit(f"{command} {target!r}: {exc}") from None
    from ..tools import Tool

    if isinstance(value, Tool):
        raise SystemExit(
            f"{command} {target!r}: {attr} is a tool, not an agent; give an Agent that has "
            f"it, e.g. agent = Agent(model, tools=[{attr}]), then {command} {module_name}:agent"
        )
    if not isinstance(value, Agent) and callable(value):
        try:
            value = value()
        except Exception as exc:  # a factory that needs arguments, or fails
            raise SystemExit(
                f"{command} {target!r}: calling {attr}() to make the agent failed: "
                f"{type(exc).__name__}: {exc} (give an Agent, or a function taking no "
                "arguments that returns one)"
            ) from None
    if not isinstance(value, Agent):
        raise SystemExit(f"{command} {target!r}: expected an Agent, got {type(value).__name__}")
    return value


def default_agent(args: argparse.Namespace) -> Any:
    from ..agent import Agent
    from .demo import DemoModel, add, weather
    from .setup import load_tools, resolve_model

    spec = args.model or os.environ.get("TREADLE_MODEL")
    if spec and spec != "offline":
        provider, _ = resolve_model(spec, api_key=args.api_key, base_url=args.base_url)
        return Agent(
            provider, tools=[add, weather, *load_tools(args.tool)], system_prompt=args.system
        )
    print("(offline: a labelled offline model answers; set TREADLE_MODEL to use a real one)")
    tools = [add, weather, *load_tools(args.tool)]
    return Agent(DemoModel(), tools=tools, system_prompt=args.system, name="demo")


def is_loopback(host: str) -> bool:
    if host in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def choose_token(host: str, given: str | None) -> str | None:
    """The token the server asks for: ``given``, else a new one when ``host`` is not a
    loopback address (as Jupyter does), else none."""
    if given:
        return given
    if is_loopback(host):
        return None
    from ..ui.web import new_token

    return new_token()


def cmd_ui(args: argparse.Namespace) -> int:
    try:
        import uvicorn  # noqa: F401
    except ImportError:
        from ..errors import install_hint

        print(f"treadle ui needs the web extra: {install_hint('web')}", file=sys.stderr)
        return 2
    from ..errors import ConfigurationError
    from ..ui.web import check_port, serve

    try:
        check_port(args.host, args.port)  # before loading the agent: one line, no traceback
    except ConfigurationError as exc:
        print(f"treadle ui: {exc}", file=sys.stderr)
        return 2
    agent = load_agent(args.target) if args.target else default_agent(args)
    store = None
    if args.store:
        from ..sessions import open_store

        store = open_store(args.store)
    token = choose_token(args.host, args.token or os.environ.get("TREADLE_UI_TOKEN"))
    print(f"treadle ui · {agent.provider.name}:{agent.provider.model}")
    serve(
        agent,
        host=args.host,
        port=args.port,
        token=token,
        origins=args.origin,
        trusted_hosts=args.trusted_host,
        store=store,
        request_timeout=args.request_timeout,
    )
    return 0


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    ui = sub.add_parser(
        "ui",
        parents=[common],
        help="a local web app: chat, live run inspector, sessions",
        description=(
            "Serve an agent in the browser. TARGET is module:agent (an Agent, or a function "
            "returning one), found in the current directory as uvicorn finds apps; without "
            "it, the model is --model / TREADLE_MODEL, or a labelled offline model."
        ),
    )
    ui.add_argument("target", nargs="?", help="module:agent, e.g. myapp:agent")
    ui.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ui.add_argument("--port", "-p", type=int, default=8000, help="port (default 8000)")
    ui.add_argument(
        "--token",
        help="the token every request must carry (default: generated and printed when "
        "--host is not a loopback address; $TREADLE_UI_TOKEN also works)",
    )
    ui.add_argument(
        "--origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="an Origin allowed to POST besides the server's own, e.g. "
        "https://chat.example.com behind an HTTPS proxy (repeatable)",
    )
    ui.add_argument(
        "--trusted-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name answered besides loopback names, e.g. chat.example.com behind a "
        "proxy (repeatable)",
    )
    ui.add_argument(
        "--request-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="a request (headers and body) must arrive whole within this (default 60)",
    )
    ui.add_argument(
        "--store",
        help="keep sessions here (.db: SQLite, else a JSONL directory); default: "
        "the agent's store, else memory",
    )

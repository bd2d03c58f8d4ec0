"""``treadle serve module:agent --openai --mcp --a2a``: serve agents to other software — the
OpenAI API under ``/v1``, MCP at ``/mcp``, A2A at the root (its card at
``/.well-known/agent-card.json``), any combination, on one port; or MCP over stdio
(``--mcp-stdio``). Every HTTP surface is guarded (docs/security.md)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from .ui import choose_token, load_agent

A2A_MISSING = "treadle serve --a2a needs the A2A server (the a2a extra): pip install 'treadle[a2a]'"


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def a2a_root(agent: Any, *, url: str | None, guard: dict[str, Any]) -> Any:
    """The A2A app for ``agent`` from ``treadle.a2a.a2a_app`` (its own extra); ``SystemExit``
    saying what to install when it is not there. ``url``: the address its card names
    (``None``: the one each request came to, its ``Host`` checked by the guard)."""
    try:
        factory = importlib.import_module("treadle.a2a").a2a_app
    except (ImportError, AttributeError):
        raise SystemExit(A2A_MISSING) from None
    return factory(agent, url=url, **guard)


def cmd_serve(args: argparse.Namespace) -> int:
    http = args.openai or args.mcp or args.a2a
    if not http and not args.mcp_stdio:
        raise SystemExit(
            "treadle serve: choose what to serve: --openai (the OpenAI API under /v1), --mcp "
            "(MCP at /mcp), --a2a (A2A at /), any of them together; or --mcp-stdio"
        )
    if args.mcp_stdio and http:
        raise SystemExit(
            "treadle serve: --mcp-stdio speaks on standard input and output only; serve the "
            "HTTP surfaces (--openai, --mcp, --a2a) from another process"
        )
    if args.a2a_url and not args.a2a:
        raise SystemExit("treadle serve: --a2a-url is the address of the A2A surface: add --a2a")
    agents = [load_agent(target, "treadle serve") for target in args.targets]
    if args.mcp_stdio:
        return _stdio(agents)
    try:
        import uvicorn  # noqa: F401
    except ImportError:
        from ..errors import install_hint

        _say(f"treadle serve needs the web extra: {install_hint('web')}")
        return 2
    from ..errors import ConfigurationError
    from ..ui import serve
    from ..ui.web import check_port

    try:
        check_port(args.host, args.port)
    except ConfigurationError as exc:
        _say(f"treadle serve: {exc}")
        return 2
    token = choose_token(args.host, args.token or os.environ.get("TREADLE_SERVE_TOKEN"))
    shown = f"[{args.host}]" if ":" in args.host else args.host
    base = f"http://{shown}:{args.port}"
    try:
        app = served_app(args, agents, token)
    except (ValueError, TypeError) as exc:
        _say(f"treadle serve: {exc}")
        return 2
    names = ", ".join(a.name for a in agents)
    print(f"treadle serve · {names}", flush=True)
    if args.openai:
        print(f"    OpenAI API: {base}/v1   (base_url; model: {agents[0].name})", flush=True)
    if args.mcp:
        print(f"    MCP:        {base}/mcp", flush=True)
    if args.a2a:
        print(f"    A2A:        {base}/.well-known/agent-card.json", flush=True)
    if token:
        print(f"    token:      {token}   (Authorization: Bearer <token>)", flush=True)
    serve(app, host=args.host, port=args.port, request_timeout=args.request_timeout)
    return 0


def served_app(args: argparse.Namespace, agents: list[Any], token: str | None) -> Any:
    """The one ASGI app ``treadle serve`` serves: the surfaces ``args`` chose, behind the
    guard (``token``, ``--origin``, ``--trusted-host``, ``--request-timeout``)."""
    from ..ui.agent_server import agent_server_app

    guard: dict[str, Any] = {
        "token": token,
        "origins": args.origin,
        "trusted_hosts": args.trusted_host,
        "body_timeout": args.request_timeout,
    }
    root = a2a_root(agents[0], url=args.a2a_url, guard=guard) if args.a2a else None
    return agent_server_app(agents, openai=args.openai, mcp=args.mcp, root=root, **guard)


def _stdio(agents: list[Any]) -> int:
    try:
        from ..ui.mcp_server import serve_mcp_stdio
    except ImportError:  # pragma: no cover - depends on the environment
        from ..errors import install_hint

        _say(f"treadle serve --mcp-stdio needs the mcp extra: {install_hint('mcp')}")
        return 2
    import anyio

    _say(f"treadle serve · MCP over stdio · {', '.join(a.name for a in agents)}")
    anyio.run(serve_mcp_stdio, agents)
    return 0


def add_parser(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve agents to other software: OpenAI API, MCP, A2A",
        description=(
            "Serve agents to other software on one port: --openai (the OpenAI API under "
            "/v1: Chat Completions, Responses), --mcp (each agent an MCP tool at /mcp), --a2a "
            "(A2A at /, its card at /.well-known/agent-card.json), any combination; or "
            "--mcp-stdio (MCP on standard input and output). TARGET is module:agent (an "
            "Agent, or a function returning one), found in the current directory."
        ),
    )
    serve.add_argument(
        "targets",
        nargs="+",
        metavar="TARGET",
        help="module:agent (several: MCP tools, OpenAI models)",
    )
    serve.add_argument("--openai", action="store_true", help="the OpenAI API under /v1")
    serve.add_argument("--mcp", action="store_true", help="MCP (streamable HTTP) at /mcp")
    serve.add_argument("--a2a", action="store_true", help="A2A at / (needs treadle[a2a])")
    serve.add_argument(
        "--mcp-stdio", action="store_true", help="MCP on standard input and output (alone)"
    )
    serve.add_argument(
        "--a2a-url",
        metavar="URL",
        help="the address A2A clients reach the server by, named in its card (behind a "
        "proxy, say; default: the address each client asked, as its Host header says)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", "-p", type=int, default=8000, help="port (default 8000)")
    serve.add_argument(
        "--token",
        help="the token every request must carry as Authorization: Bearer (default: "
        "generated and printed when --host is not a loopback address; $TREADLE_SERVE_TOKEN)",
    )
    serve.add_argument(
        "--origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="an Origin allowed to POST (a web page of yours; repeatable)",
    )
    serve.add_argument(
        "--trusted-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name answered besides loopback names (behind a proxy; repeatable)",
    )
    serve.add_argument(
        "--request-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="a request (headers and body) must arrive whole within this (default 60)",
    )

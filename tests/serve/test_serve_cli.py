"""``treadle serve``'s choices and its seam for A2A: ``--a2a`` takes the app
``treadle.a2a.a2a_app(agent, ...)`` makes, serves it at the root behind the same guard (the
card at ``/.well-known/agent-card.json``), and says what to install when it is missing."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from treadle import Agent
from treadle.cli import build_parser, main
from treadle.cli.serve import A2A_MISSING, a2a_root, served_app
from treadle.testing import ScriptedProvider

pytest.importorskip("starlette", reason="the web extra is not installed")

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from treadle.ui.agent_server import agent_server_app, app_lifespan

TOKEN = "cli-test-token-0123"


def fake_a2a(started: list[str]) -> Any:
    """What an A2A app factory gives: an ASGI app with a lifespan and a card."""

    def a2a_app(agent: Agent[Any], *, url: str, token: str | None = None) -> Any:
        async def card(request: Any) -> JSONResponse:
            return JSONResponse({"name": agent.name, "url": url, "token_set": token is not None})

        @contextlib.asynccontextmanager
        async def lifespan(app: Any) -> AsyncIterator[None]:
            started.append("up")
            yield
            started.append("down")

        return Starlette(routes=[Route("/.well-known/agent-card.json", card)], lifespan=lifespan)

    return a2a_app


def test_a2a_without_the_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "treadle.a2a", None)  # an import of it fails
    with pytest.raises(SystemExit) as raised:
        a2a_root(Agent(ScriptedProvider("hi")), url="http://127.0.0.1:8000/", guard={})
    assert str(raised.value) == A2A_MISSING
    assert "pip install 'treadle[a2a]'" in A2A_MISSING


def card_url(card: dict[str, Any]) -> str:
    return str(card["supportedInterfaces"][0]["url"])


@pytest.mark.anyio
async def test_a2a_serves_the_real_card_at_the_root_behind_the_token() -> None:
    """``treadle serve --a2a`` (its app, from the command line's own parser): the card
    names the address the client asked for — not the address bound — unless
    ``--a2a-url`` names one."""
    pytest.importorskip("a2a", reason="the a2a extra is not installed")
    agent = Agent(ScriptedProvider("hi"), name="assistant")
    auth = {"authorization": f"Bearer {TOKEN}"}
    for extra, asked, named in [
        ([], "http://agents.example:8000", "http://agents.example:8000/"),
        (["--a2a-url", "https://a.example/"], "http://127.0.0.1:8000", "https://a.example/"),
    ]:
        args = build_parser().parse_args(["serve", "m:agent", "--a2a", *extra])
        app = served_app(args, [agent], TOKEN)
        transport = httpx.ASGITransport(app)
        async with (
            app_lifespan(app),
            httpx.AsyncClient(transport=transport, base_url=asked) as client,
        ):
            assert (await client.get("/.well-known/agent-card.json")).status_code == 401
            card = (await client.get("/.well-known/agent-card.json", headers=auth)).json()
            assert card["name"] == "assistant"
            assert card_url(card) == named


def test_a2a_url_needs_a2a() -> None:
    with pytest.raises(SystemExit, match="--a2a-url is the address of the A2A surface"):
        main(["serve", "tests.serve.served_agent:agent", "--mcp", "--a2a-url", "https://a.example"])


@pytest.mark.anyio
async def test_served_together_each_surface_has_its_path_and_the_guard() -> None:
    started: list[str] = []
    agent = Agent(ScriptedProvider(["hi"] * 5), name="assistant")
    root = fake_a2a(started)(agent, url="http://127.0.0.1:8000/", token=TOKEN)
    app = agent_server_app(agent, root=root, token=TOKEN)
    transport = httpx.ASGITransport(app)
    async with (
        app_lifespan(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client,
    ):
        assert started == ["up"]
        auth = {"authorization": f"Bearer {TOKEN}"}
        card = await client.get("/.well-known/agent-card.json", headers=auth)
        assert card.json() == {
            "name": "assistant",
            "url": "http://127.0.0.1:8000/",
            "token_set": True,
        }
        assert (await client.get("/.well-known/agent-card.json")).status_code == 401
        assert (await client.get("/v1/models")).status_code == 401
        models = await client.get("/v1/models", headers=auth)
        assert [m["id"] for m in models.json()["data"]] == ["assistant"]
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        accept = {"accept": "application/json, text/event-stream"}
        assert (await client.post("/mcp", json=init, headers=accept)).status_code == 401
        opened = await client.post("/mcp", json=init, headers={**auth, **accept})
        assert opened.status_code == 200
    assert started == ["up", "down"]


@pytest.mark.anyio
async def test_an_mcp_session_ends_with_delete_without_a_token_on_loopback() -> None:
    """A DELETE carries no body and no Origin: a browser sends one to another site only after
    a preflight (never granted), so the guard lets it through; the SDK's client ends its
    session with one."""
    app = agent_server_app(Agent(ScriptedProvider("hi")), openai=False)
    transport = httpx.ASGITransport(app)
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"accept": "application/json, text/event-stream"}
    async with (
        app_lifespan(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client,
    ):
        opened = await client.post("/mcp", json=init, headers=accept)
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        ended = await client.delete(
            "/mcp", headers={**session, "mcp-protocol-version": "2025-06-18"}
        )
        assert ended.status_code == 200
        hostile = await client.delete("/mcp", headers={**session, "origin": "https://evil.example"})
        assert hostile.status_code == 403


def test_serve_needs_a_surface(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="choose what to serve: --openai"):
        main(["serve", "tests.serve.served_agent:agent"])
    with pytest.raises(SystemExit, match="--mcp-stdio speaks on standard input"):
        main(["serve", "tests.serve.served_agent:agent", "--mcp-stdio", "--openai"])


def test_serve_names_a_target_that_is_no_agent() -> None:
    with pytest.raises(SystemExit) as raised:
        main(["serve", "tests.serve.served_agent:weather", "--openai"])
    assert "treadle serve 'tests.serve.served_agent:weather': weather is a tool" in str(
        raised.value
    )

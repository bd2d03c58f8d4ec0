"""The web app's front door without a browser: loopback Host names only (no token), the
token (Bearer, or ``?token=`` once, then a cookie), Origin on every POST, and no secret from
the server's environment in any response; the page's assets are small and in the package."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.preloaded import Preloader

from treadle import Agent
from treadle.testing import ScriptedProvider
from treadle.ui._guard import COOKIE
from treadle.ui.web import web_app
from treadle.ui.web._guard import environment_secrets

from .conftest import SECRET, serve_ui

STATIC = Path(__file__).resolve().parents[2] / "src" / "treadle" / "ui" / "web" / "static"


def make_app(**options: object) -> object:
    return web_app(Agent(ScriptedProvider(["hi"])), **options)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_without_a_token_only_loopback_host_names_are_answered() -> None:
    app = make_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://x") as c:  # type: ignore[arg-type]
        for host in ("127.0.0.1:8000", "localhost:8000", "[::1]:8000"):
            assert (await c.get("/api/info", headers={"host": host})).status_code == 200
        rebound = await c.get("/api/info", headers={"host": "evil.example:8000"})
        assert rebound.status_code == 403 and "loopback" in rebound.text


@pytest.mark.anyio
async def test_a_token_is_asked_of_every_request() -> None:
    app = make_app(token="s3cret-token-value")
    transport = httpx.ASGITransport(app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://10.0.0.5:8000") as c:
        refused = await c.get("/")
        assert refused.status_code == 401 and "token" in refused.text
        assert (await c.get("/api/sessions")).status_code == 401
        assert (await c.get("/", params={"token": "wrong"})).status_code == 401
        bearer = {"authorization": "Bearer s3cret-token-value"}
        assert (await c.get("/api/info", headers=bearer)).status_code == 200
        # ?token= once: a cookie is set and the URL loses the token
        visit = await c.get("/", params={"token": "s3cret-token-value", "x": "1"})
        assert visit.status_code == 303 and visit.headers["location"] == "/?x=1"
        cookie = visit.headers["set-cookie"]
        # named after the server's port: two servers on one host keep their own
        assert cookie.startswith(f"{COOKIE}_8000=s3cret-token-value") and "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie
        page = await c.get("/", headers={"cookie": f"{COOKIE}_8000=s3cret-token-value"})
        assert page.status_code == 200 and "data-testid" in page.text
        assert "s3cret-token-value" not in page.text
        wrong = await c.get("/", headers={"cookie": f"{COOKIE}_8000=nope"})
        assert wrong.status_code == 401
        other_port = await c.get("/", headers={"cookie": f"{COOKIE}_8001=s3cret-token-value"})
        assert other_port.status_code == 401


@pytest.mark.anyio
async def test_every_post_checks_origin() -> None:
    app = make_app()
    transport = httpx.ASGITransport(app)  # type: ignore[arg-type]
    body = {"id": "c1", "messages": []}
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as c:
        for path in (
            "/api/chat",
            "/api/chat/c1/stop",
            "/api/chat/c1/steer",
            "/api/sessions/c1/branch",
        ):
            plain = {"content-type": "text/plain"}
            missing = await c.post(path, content=json.dumps(body), headers=plain)
            assert missing.status_code == 403 and "Origin" in missing.text, path
            foreign = await c.post(path, json=body, headers={"origin": "http://evil.example"})
            assert foreign.status_code == 403 and "cross-origin" in foreign.text, path
            other_port = await c.post(path, json=body, headers={"origin": "http://127.0.0.1:9999"})
            assert other_port.status_code == 403, path
        same = await c.post(
            "/api/chat/c1/stop", json={}, headers={"origin": "http://127.0.0.1:8000"}
        )
        assert same.status_code == 200 and same.json() == {"stopped": False}
    allowed = make_app(origins=["http://localhost:5173"])
    transport = httpx.ASGITransport(allowed)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as c:
        ok = await c.post("/api/chat/c1/stop", headers={"origin": "http://localhost:5173"})
        assert ok.status_code == 200


@pytest.mark.anyio
async def test_a_bearer_client_may_post_without_origin() -> None:
    app = make_app(token="tok-tok-tok-tok")
    transport = httpx.ASGITransport(app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://10.0.0.5:8000") as c:
        ok = await c.post("/api/chat/c1/stop", headers={"authorization": "Bearer tok-tok-tok-tok"})
        assert ok.status_code == 200
        cookie_only = await c.post(
            "/api/chat/c1/stop", headers={"cookie": f"{COOKIE}_8000=tok-tok-tok-tok"}
        )
        assert cookie_only.status_code == 403  # a browser's cookie needs its Origin too


def test_secret_names_are_recognised() -> None:
    env = {
        "OPENAI_API_KEY": "sk-abcdefgh123",
        "GITHUB_TOKEN": "ghp_zzzzzzzzzz",
        "HOME": "/root/xyzxyz",
        "SHORT_KEY": "abc",
    }
    assert set(environment_secrets(env)) == {b"sk-abcdefgh123", b"ghp_zzzzzzzzzz"}


def test_the_page_assets_are_small_and_local() -> None:
    files = {p.name: p.read_bytes() for p in STATIC.iterdir()}
    assert set(files) == {"index.html", "app.js", "inspector.js", "files.js", "app.css"}
    assert sum(len(b) for b in files.values()) < 150_000
    for name, data in files.items():
        text = data.decode()
        assert "http://" not in text.replace("http://www.w3.org", "") or name == "app.js", name
        assert "https://" not in text and "//cdn" not in text, name
    for script in ("app.js", "inspector.js", "files.js"):
        assert "innerHTML" not in files[script].decode()
        assert "insertAdjacentHTML" not in files[script].decode()


@pytest.fixture(scope="module")
def served(server_preloader: Preloader) -> Iterator[str]:
    with serve_ui("tests.webapp.scripted_agent:agent", preloader=server_preloader) as url:
        yield url


def test_no_secret_reaches_the_page(served: str) -> None:
    origin = {"origin": served}
    seen: list[str] = []
    with httpx.Client(base_url=served, timeout=30) as c:
        for path in ("/", "/static/app.js", "/static/app.css", "/api/info", "/api/sessions"):
            seen.append(c.get(path).text)
        body = {
            "id": "secret-chat",
            "messages": [
                {
                    "id": "u",
                    "role": "user",
                    "parts": [{"type": "text", "text": "print envkey short"}],
                }
            ],
        }
        with c.stream("POST", "/api/chat", json=body, headers=origin) as r:
            assert r.status_code == 200
            run_id = r.headers["x-treadle-run-id"]
            seen.append(r.read().decode())
        seen.append(c.get(f"/api/runs/{run_id}/events").text)
        seen.append(c.get("/api/sessions/secret-chat").text)
    everything = "\n".join(seen)
    assert SECRET not in everything
    # the model did say it (the scripted model echoes the variable): masked, same length
    assert "*" * len(SECRET) in everything
    frames = [json.loads(line[6:]) for line in seen[-2].splitlines() if line.startswith("data: ")]
    events = [f for f in frames if "type" in f]
    assert events[0]["type"] == "agent_start" and events[-1]["type"] == "agent_end"

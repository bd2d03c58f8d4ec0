"""Every route of ``a2a_app`` — the card included — is behind treadle's HTTP guard, tested
by attack: a hostile page's cross-site POST carrying an approval, DNS rebinding, a LAN
peer, a missing or wrong token, a body too large. In process (the a2a-sdk server runs on
asyncio only), through the app's ASGI interface with the peer address set."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a")

from tests.a2a.sut import DELETED, make_agent

from treadle.a2a import a2a_app

pytestmark = [pytest.mark.anyio, pytest.mark.one_backend]  # the sdk's server: asyncio only

CARD = "/.well-known/agent-card.json"
V1 = {"A2A-Version": "1.0"}


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def send(text: str | None = None, *, data: Any = None, task_id: str = "") -> dict[str, Any]:
    part = {"text": text} if text is not None else {"data": data}
    message = {"messageId": f"m-{text}-{task_id}", "role": "ROLE_USER", "parts": [part]}
    if task_id:
        message["taskId"] = task_id
    return rpc("SendMessage", {"message": message})


def client(app: Any, peer: str = "127.0.0.1", host: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(peer, 50000))
    return httpx.AsyncClient(transport=transport, base_url=f"http://{host}")


async def test_a_cross_site_post_carrying_an_approval_never_runs_the_tool() -> None:
    """The attack on a token-less server on loopback: a page the user visits posts the
    approval of a waiting delete_file as text/plain (no CORS preflight). Refused; the task
    still waits, and nothing was deleted."""
    app = a2a_app(make_agent())
    async with client(app) as http:
        waiting = (await http.post("/", json=send("delete /etc/passwd"), headers=V1)).json()
        task = waiting["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        attack = json.dumps(send(data={"approved": True}, task_id=task["id"]))
        for headers in (
            {"Origin": "http://evil.example", "Content-Type": "text/plain"},
            {"Origin": "http://evil.example", "Content-Type": "application/json"},
            {"Origin": "null", "Content-Type": "application/json"},
            {"Content-Type": "text/plain"},  # no Origin, not JSON
        ):
            refused = await http.post("/", content=attack, headers={**headers, **V1})
            assert refused.status_code == 403, headers
        got = await http.post("/", json=rpc("GetTask", {"id": task["id"]}), headers=V1)
        assert got.json()["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert "/etc/passwd" not in DELETED


async def test_rebinding_and_lan_peers_get_nothing_without_a_token() -> None:
    app = a2a_app(make_agent())
    async with client(app, host="attacker.example") as http:  # DNS rebinding
        assert (await http.get(CARD)).status_code == 403
        assert (await http.post("/", json=send("hi"), headers=V1)).status_code == 403
    async with client(app, peer="192.168.1.20") as http:  # another machine
        assert (await http.get(CARD)).status_code == 403
        assert (await http.post("/", json=send("hi"), headers=V1)).status_code == 403
    async with client(app) as http:  # this machine
        assert (await http.get(CARD)).status_code == 200


async def test_with_a_token_every_route_asks_for_it() -> None:
    app = a2a_app(make_agent(), token="a-long-enough-token")
    async with client(app, peer="10.0.0.7", host="agents.example") as http:
        for headers in ({}, {"Authorization": "Bearer wrong-token-123"}):
            assert (await http.get(CARD, headers=headers)).status_code == 401
            answer = await http.post("/", json=send("hi"), headers={**headers, **V1})
            assert answer.status_code == 401
        good = {"Authorization": "Bearer a-long-enough-token"}
        card = await http.get(CARD, headers=good)
        assert card.status_code == 200
        assert card.json()["securityRequirements"] == [{"schemes": {"bearer": {}}}]
        sent = await http.post("/", json=send("hi"), headers={**good, **V1})
        assert sent.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        # the token does not make a foreign Origin welcome
        foreign = {**good, **V1, "Origin": "http://evil.example"}
        assert (await http.post("/", json=send("hi"), headers=foreign)).status_code == 403


async def test_bodies_are_bounded() -> None:
    app = a2a_app(make_agent(), max_body_bytes=2_000)
    async with client(app) as http:
        big = send("x" * 5_000)
        assert (await http.post("/", json=big, headers=V1)).status_code == 413

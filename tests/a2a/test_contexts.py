"""A2A contexts are treadle conversations: two tasks in one context share a history, a
store keeps it across servers, and structured output is an artifact. In process (the
a2a-sdk server runs on asyncio only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

pytest.importorskip("a2a")

from treadle import Agent
from treadle.a2a import a2a_app
from treadle.providers import ModelRequest
from treadle.sessions import SqliteStore
from treadle.testing import ScriptedProvider

pytestmark = [pytest.mark.anyio, pytest.mark.one_backend]  # the sdk's server: asyncio only
V1 = {"A2A-Version": "1.0"}


class Counting(ScriptedProvider):
    """Answers with how many user messages the request's history holds."""

    def __init__(self) -> None:
        super().__init__([])

    async def stream(self, request: ModelRequest, *, cancel: Any = None) -> Any:
        users = sum(1 for m in request.messages if m.role == "user")
        inner = ScriptedProvider([f"{users} user messages so far"])
        async for event in inner.stream(request, cancel=cancel):
            yield event


async def send(app: Any, text: str, context_id: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": text, "role": "ROLE_USER", "parts": [{"text": text}]}
    if context_id:
        message["contextId"] = context_id
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        answer: dict[str, Any] = (await http.post("/", json=body, headers=V1)).json()
    return answer


async def say(app: Any, text: str, context_id: str = "") -> dict[str, Any]:
    task: dict[str, Any] = (await send(app, text, context_id))["result"]["task"]
    return task


def said(task: dict[str, Any]) -> str:
    return str(task["status"]["message"]["parts"][0]["text"])


async def test_a_context_is_one_conversation_kept_by_the_store(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a2a.db")
    first = a2a_app(Agent(Counting(), store=store))
    one = await say(first, "one", "chat-1")
    two = await say(first, "two", "chat-1")
    other = await say(first, "elsewhere", "chat-2")
    assert (said(one), said(two), said(other)) == (
        "1 user messages so far",
        "2 user messages so far",
        "1 user messages so far",
    )
    await first.state.a2a.aclose()  # the server stops: its session locks are released
    second = a2a_app(Agent(Counting(), store=store))
    three = await say(second, "three", "chat-1")
    assert said(three) == "3 user messages so far"
    assert store.exists("chat-1")


async def test_an_unusable_context_id_fails_with_what_to_do() -> None:
    app = a2a_app(Agent(Counting()))
    answer = await send(app, "hi", "../../etc")
    assert answer["error"]["code"] == -32602  # invalid params
    assert "context id '../../etc' is not usable: use letters" in answer["error"]["message"]


class Trip(BaseModel):
    city: str
    days: int


async def test_structured_output_is_a_data_artifact() -> None:
    from treadle.types import AssistantMessage, ToolCall

    call = ToolCall(id="o1", name="final_result", arguments={"city": "Porto", "days": 3})
    agent = Agent(ScriptedProvider([AssistantMessage(content=[call])]), output_type=Trip)
    task = await say(a2a_app(agent), "plan a trip")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    (output,) = [a for a in task["artifacts"] if a["name"] == "output"]
    assert output["parts"][0]["data"] == {"city": "Porto", "days": 3}

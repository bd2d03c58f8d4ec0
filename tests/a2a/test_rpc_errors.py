"""Errors at the JSON-RPC door, against the served agent (tests/a2a/sut.py). The streaming
methods answer an error as they answer everything: an event stream (``text/event-stream``,
the JSON-RPC error as its one event), the way the JSON-RPC binding of A2A 1.0 answers
``SendStreamingMessage`` and ``SubscribeToTask``; the sdk's own client reads it as the error
it is. Push notifications, which the card says are not offered, are refused with ``-32003``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from tests.a2a.a2a_helpers import auth, user_message

pytest.importorskip("a2a")

from a2a.client import Client
from a2a.types import SubscribeToTaskRequest
from a2a.utils.errors import TaskNotFoundError

pytestmark = pytest.mark.slow  # a server process (tests/a2a/sut.py)


def stream(a2a_url: str, method: str, params: dict[str, Any]) -> tuple[httpx.Response, list[Any]]:
    body = {"jsonrpc": "2.0", "id": "s-1", "method": method, "params": params}
    headers = {**auth(), "accept": "text/event-stream"}
    answer = httpx.post(a2a_url + "/", json=body, headers=headers, timeout=30)
    events = [
        json.loads(line.removeprefix("data: "))
        for line in answer.text.splitlines()
        if line.startswith("data: ")
    ]
    return answer, events


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("SubscribeToTask", {"id": "no-such-task"}),
        (
            "SendStreamingMessage",
            {
                "message": {
                    "messageId": uuid.uuid4().hex,
                    "role": "ROLE_USER",
                    "taskId": "no-such-task",
                    "parts": [{"text": "hello"}],
                }
            },
        ),
        ("tasks/resubscribe", {"id": "no-such-task"}),  # 0.3
    ],
)
def test_an_unknown_task_is_an_error_event_in_a_stream(
    a2a_url: str, method: str, params: dict[str, Any]
) -> None:
    answer, events = stream(a2a_url, method, params)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    (event,) = events
    assert event["id"] == "s-1"
    assert event["error"]["code"] == -32001  # TaskNotFoundError
    assert "result" not in event


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("CreateTaskPushNotificationConfig", {"taskId": "t", "url": "https://hook.example/"}),
        ("GetTaskPushNotificationConfig", {"taskId": "t", "id": "c"}),
        ("ListTaskPushNotificationConfigs", {"taskId": "t"}),
        ("DeleteTaskPushNotificationConfig", {"taskId": "t", "id": "c"}),
    ],
)
def test_push_notifications_are_not_supported(
    a2a_url: str, method: str, params: dict[str, Any]
) -> None:
    body = {"jsonrpc": "2.0", "id": 4, "method": method, "params": params}
    answer = httpx.post(a2a_url + "/", json=body, headers=auth(), timeout=30).json()
    assert answer["error"]["code"] == -32003  # PushNotificationNotSupportedError
    assert "not supported" in answer["error"]["message"]


def test_other_methods_still_answer_json(a2a_url: str) -> None:
    body = {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "no-such-task"}}
    answer = httpx.post(a2a_url + "/", json=body, headers=auth(), timeout=30)
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.json()["error"]["code"] == -32001


@pytest.mark.anyio
async def test_the_sdk_client_reads_the_error_event_as_the_error(a2a_client: Client) -> None:
    with pytest.raises(TaskNotFoundError):
        async for _ in a2a_client.subscribe(SubscribeToTaskRequest(id="no-such-task")):
            pass
    with pytest.raises(TaskNotFoundError):
        async for _ in a2a_client.send_message(user_message(text="hi", task_id="no-such-task")):
            pass

"""``ListTasks`` as A2A 1.0 asks, over raw JSON-RPC against the served agent (its own
process, tests/a2a/sut.py): pages of 50 unless asked, ``pageSize`` the size of the page
returned, cursors that walk every task once, newest status first, the filters (an unknown
status refused), ``historyLength`` and ``includeArtifacts``."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from tests.a2a.a2a_helpers import auth

pytest.importorskip("a2a")

pytestmark = pytest.mark.slow  # a server process (tests/a2a/sut.py)

Rpc = Callable[[str, dict[str, Any]], dict[str, Any]]
COMPLETED = "TASK_STATE_COMPLETED"
INPUT = "TASK_STATE_INPUT_REQUIRED"
ANSWERED = 51  # one more than a default page
DONE = ANSWERED + 1  # and one approved
ALL = DONE + 1  # and one waiting


@pytest.fixture(scope="module")
def rpc(a2a_url: str) -> Iterator[Rpc]:
    with httpx.Client(base_url=a2a_url, headers=auth(), timeout=30) as http:

        def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
            answer: dict[str, Any] = http.post("/", json=body).json()
            return answer

        yield call


def send(rpc: Rpc, part: dict[str, Any], context_id: str, task_id: str = "") -> dict[str, Any]:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [part],
        "contextId": context_id,
        "taskId": task_id,
    }
    task: dict[str, Any] = rpc("SendMessage", {"message": message})["result"]["task"]
    return task


@pytest.fixture(scope="module")
def context(rpc: Rpc) -> str:
    """A context of its own: 51 answered tasks, one approved (a longer history: the
    client's message, the agent's question, the approval), one waiting for approval."""
    context_id = f"list-{uuid.uuid4().hex}"
    for i in range(ANSWERED):
        assert send(rpc, {"text": f"task {i}"}, context_id)["status"]["state"] == COMPLETED
    asked = send(rpc, {"text": "delete a.txt"}, context_id)
    approved = send(rpc, {"data": {"approved": True}}, context_id, asked["id"])
    assert approved["status"]["state"] == COMPLETED
    assert send(rpc, {"text": "delete b.txt"}, context_id)["status"]["state"] == INPUT
    return context_id


def listed(rpc: Rpc, **params: Any) -> dict[str, Any]:
    answer = rpc("ListTasks", params)
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


def test_a_page_holds_50_tasks_unless_asked_and_says_how_many_it_holds(
    rpc: Rpc, context: str
) -> None:
    first = listed(rpc, contextId=context)
    assert (len(first["tasks"]), first["pageSize"], first["totalSize"]) == (50, 50, ALL)
    assert first["nextPageToken"] != ""
    rest = listed(rpc, contextId=context, pageToken=first["nextPageToken"])
    assert (len(rest["tasks"]), rest["pageSize"], rest["totalSize"]) == (3, 3, ALL)
    assert rest["nextPageToken"] == ""  # the last page says so


def test_no_task_is_an_empty_page_of_size_0(rpc: Rpc) -> None:
    empty = listed(rpc, contextId=f"nothing-{uuid.uuid4().hex}")
    assert empty == {"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0}


def test_pages_walk_every_task_once_newest_status_first(rpc: Rpc, context: str) -> None:
    seen: list[dict[str, Any]] = []
    token = ""
    while True:
        page = listed(rpc, contextId=context, pageSize=20, pageToken=token)
        assert page["pageSize"] == len(page["tasks"]) <= 20
        seen += page["tasks"]
        token = page["nextPageToken"]
        if not token:
            break
    assert len({t["id"] for t in seen}) == len(seen) == ALL
    stamps = [t["status"]["timestamp"] for t in seen]
    assert stamps == sorted(stamps, reverse=True)  # RFC 3339 in UTC: text order is time order
    assert seen[0]["status"]["state"] == INPUT  # the last one sent


def test_filters_by_status_and_by_last_update(rpc: Rpc, context: str) -> None:
    waiting = listed(rpc, contextId=context, status=INPUT)
    assert [t["status"]["state"] for t in waiting["tasks"]] == [INPUT]
    done = listed(rpc, contextId=context, status=COMPLETED, pageSize=100)
    assert done["totalSize"] == DONE
    assert {t["status"]["state"] for t in done["tasks"]} == {COMPLETED}
    newest = listed(rpc, contextId=context, pageSize=5)["tasks"]
    since = newest[-1]["status"]["timestamp"]
    after = listed(rpc, contextId=context, statusTimestampAfter=since)
    assert [t["id"] for t in after["tasks"]] == [t["id"] for t in newest]
    both = listed(rpc, contextId=context, statusTimestampAfter=since, status=COMPLETED)
    assert [t["id"] for t in both["tasks"]] == [t["id"] for t in newest[1:]]


@pytest.mark.parametrize("status", ["INVALID_STATUS", "completed", 42, True, {"state": 3}])
def test_a_status_that_names_no_state_is_refused_not_ignored(rpc: Rpc, status: Any) -> None:
    answer = rpc("ListTasks", {"status": status})
    assert "result" not in answer
    assert answer["error"]["code"] == -32602
    assert "is not a task state" in answer["error"]["message"]
    assert "TASK_STATE_WORKING" in answer["error"]["message"]  # what to give instead


def test_history_length_keeps_the_latest_messages(rpc: Rpc, context: str) -> None:
    (task,) = listed(rpc, contextId=context, pageSize=1, status=COMPLETED)["tasks"]
    full = rpc("GetTask", {"id": task["id"]})["result"]["history"]
    assert len(full) == 3  # the approved one: the client's message, the question, the answer

    def history(length: int) -> list[Any]:
        (found,) = listed(
            rpc, contextId=context, pageSize=1, status=COMPLETED, historyLength=length
        )["tasks"]
        return [m["messageId"] for m in found.get("history", [])]

    ids = [m["messageId"] for m in full]
    assert history(0) == []
    assert history(2) == ids[-2:]
    assert history(100) == ids


def test_artifacts_only_when_asked(rpc: Rpc, context: str) -> None:
    (plain,) = listed(rpc, contextId=context, pageSize=1, status=COMPLETED)["tasks"]
    assert "artifacts" not in plain
    (full,) = listed(rpc, contextId=context, pageSize=1, status=COMPLETED, includeArtifacts=True)[
        "tasks"
    ]
    assert full["id"] == plain["id"]
    assert [a["parts"][0]["text"] for a in full["artifacts"]] == ["Tool said: deleted a.txt"]


@pytest.mark.parametrize("params", [{"pageSize": 0}, {"pageSize": 101}, {"historyLength": -1}])
def test_a_page_size_or_history_length_out_of_range_is_refused(
    rpc: Rpc, params: dict[str, Any]
) -> None:
    assert rpc("ListTasks", params)["error"]["code"] == -32602

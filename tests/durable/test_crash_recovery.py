"""A worker is SIGKILLed at chosen and random points of a three-turn tool-calling run
(inside the model's stream, inside a tool, between steps); a restarted worker (SQLite)
finishes it. Every completed model request and tool call ran exactly once — counted by the
model server and by the tool — the history is valid, the final answer equals an
uninterrupted run's, and the run's events continue without gaps or duplicates."""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.launched import Launch

from treadle import RunResult
from treadle.context import validate_transcript
from treadle.durable import UNKNOWN_OUTCOME

from . import checks
from .fake_model import FINAL
from .processes import Workers, go

# each test starts, kills and restarts worker processes: long, so scheduled first
pytestmark = pytest.mark.slow


def kill_when(ready: Callable[[], None], first: Launch, second: Launch) -> None:
    """Once ``ready()`` returns, SIGKILL ``first`` where it is; if anything fails before, the
    recovering worker started ahead (``second``) is stopped too, so no process outlives the
    test."""
    try:
        ready()
        first.kill_script()
    except BaseException:
        second.kill()
        second.wait(10)
        raise


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def wait_for(condition: Callable[[], bool], timeout: float = 90) -> None:
    # generous: a worker's start (Python, treadle, DBOS) is slow on a loaded machine
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the kill point was never reached")
        time.sleep(0.005)


def finish(process: Launch) -> RunResult:  # type: ignore[type-arg]
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err[-3000:]
    return RunResult.model_validate_json(out.strip().splitlines()[-1])


def check(
    result: RunResult,  # type: ignore[type-arg]
    server_log: Path,
    tools_log: Path,
    run_id: str,
    in_flight: set[str] = frozenset(),  # type: ignore[assignment]
) -> None:
    """Exactly once for everything that completed; ``in_flight``: what had finished its side
    effect but perhaps not its checkpoint when the worker died (done again, at most once)."""
    assert result.reason == "completed", result.error
    assert result.text == FINAL
    validate_transcript(result.messages)
    done = Counter(line for line in lines(server_log) if line.startswith(f"completed {run_id}:"))
    done.update(line for line in lines(tools_log) if line.startswith(f"end {run_id}/"))
    expected = {f"completed {run_id}:{k}" for k in range(4)}
    expected |= {f"end {run_id}/call-{k}" for k in range(3)}
    assert set(done) == expected, done
    for line, count in done.items():
        assert count == 1 or (count == 2 and line in in_flight), (line, count)


def stored_events(path: Path) -> list[dict]:  # type: ignore[type-arg]
    if not path.exists():
        return []
    try:
        with sqlite3.connect(path, timeout=5) as db:
            rows = db.execute("select event from treadle_durable_events order by seq").fetchall()
    except sqlite3.OperationalError:  # not created yet, or busy
        return []
    # whole events only (an update stored without its message is a JSON array)
    return [json.loads(row[0]) for row in rows if row[0].startswith("{")]


def events_of(db: str, run_id: str) -> list[dict]:  # type: ignore[type-arg]
    from treadle import durable

    async def read() -> list[dict]:  # type: ignore[type-arg]
        durable.connect(db)
        return [e.model_dump() async for e in durable.DurableRun(run_id).events()]

    return asyncio.run(read())


KILL_POINTS: dict[str, Callable[[Path, Path, str], bool]] = {
    "model stream": lambda s, t, r: (
        f"request {r}:1" in lines(s) and f"completed {r}:1" not in lines(s)
    ),
    "inside a tool": lambda s, t, r: (
        f"start {r}/call-1" in lines(t) and f"end {r}/call-1" not in lines(t)
    ),
    "between steps": lambda s, t, r: any(
        e["type"] == "tool_execution_end" for e in stored_events(s.parent / "durable.sqlite")
    ),
    "final answer": lambda s, t, r: f"request {r}:3" in lines(s),
}


@pytest.mark.parametrize("point", [*KILL_POINTS, "random-1", "random-2"])
def test_a_killed_worker_s_run_is_finished_exactly_once(
    point: str,
    tmp_path: Path,
    model_server: tuple[str, Path],
    workers: Workers,
) -> None:
    url, server_log = model_server
    db = f"sqlite:///{tmp_path / 'durable.sqlite'}"
    tools_log = tmp_path / "tools.log"
    run_id = f"run-{point.replace(' ', '-')}"
    first = workers.start(db, url, tools_log, "start", run_id)
    second = workers.ahead(db, url, tools_log, run_id)

    def ready() -> None:
        if point in KILL_POINTS:
            wait_for(lambda: KILL_POINTS[point](server_log, tools_log, run_id))
        else:
            wait_for(lambda: f"request {run_id}:0" in lines(server_log))
            time.sleep(random.Random(point).uniform(0.0, 1.6))

    kill_when(ready, first, second)
    # What may have been cut between its side effect and its checkpoint: the newest model
    # request (a server can finish writing a response the dead worker never read) and the
    # newest tool call. Everything before them had been checkpointed, so it runs once.
    requests = [
        line.split()[1] for line in lines(server_log) if line.startswith(f"request {run_id}:")
    ]
    newest = max(requests, key=lambda name: int(name.rsplit(":", 1)[1]))
    ended = [line for line in lines(tools_log) if line.startswith(f"end {run_id}/")]
    in_flight = {f"completed {newest}", *(ended[-1:])}
    if point == "between steps":
        # The kill follows a poll of the event table, and the worker goes straight on to its
        # next model request: that request may have been answered, never checkpointed.
        in_flight = {f"completed {newest}"}
    elif point in KILL_POINTS:
        in_flight = set()
    result = finish(go(second))
    check(result, server_log, tools_log, run_id, in_flight)

    events = events_of(db, run_id)
    assert [e["seq"] for e in events] == list(range(len(events)))  # no gap, no duplicate
    types = [e["type"] for e in events]
    assert types.count("agent_start") == 1 and types[-1] == "agent_end"
    texts = [
        e for e in events if e["type"] == "message_end" and e["message"]["role"] == "assistant"
    ]
    assert [m["message"]["content"][0]["text"] for m in texts][-1] == FINAL


def test_an_uninterrupted_run(
    tmp_path: Path, model_server: tuple[str, Path], workers: Workers
) -> None:
    url, server_log = model_server
    db = f"sqlite:///{tmp_path / 'durable.sqlite'}"
    tools_log = tmp_path / "tools.log"
    result = finish(workers.start(db, url, tools_log, "start", "plain"))
    check(result, server_log, tools_log, "plain")
    assert [line for line in lines(server_log) if line.startswith("request")] == [
        f"request plain:{k}" for k in range(4)
    ]


def test_a_non_idempotent_call_cut_by_a_crash_is_never_run_twice(
    tmp_path: Path,
    model_server: tuple[str, Path],
    workers: Workers,
) -> None:
    url, server_log = model_server
    db = f"sqlite:///{tmp_path / 'durable.sqlite'}"
    tools_log = tmp_path / "tools.log"
    first = workers.start(db, url, tools_log, "start", "once", TOOL_IDEMPOTENT="0")
    second = workers.ahead(db, url, tools_log, "once", TOOL_IDEMPOTENT="0")
    kill_when(
        lambda: wait_for(lambda: KILL_POINTS["inside a tool"](server_log, tools_log, "once")),
        first,
        second,
    )
    result = finish(go(second))
    assert result.reason == "completed" and result.text == FINAL
    validate_transcript(result.messages)
    answers = {m.tool_call_id: m for m in result.messages if m.role == "tool_result"}
    assert answers["call-1"].is_error and answers["call-1"].text == UNKNOWN_OUTCOME
    assert not answers["call-0"].is_error and not answers["call-2"].is_error
    starts = [line for line in lines(tools_log) if line.startswith("start once/call-1")]
    assert starts == ["start once/call-1"]  # started once, cut, never again
    assert "end once/call-1" not in lines(tools_log)


UPGRADE = Path(__file__).parents[1] / "fixtures" / "durable" / "run-begun-by-0.1.sql"


def test_a_run_begun_by_treadle_0_1_is_finished_without_repeating_its_steps(
    tmp_path: Path,
    model_server: tuple[str, Path],
    workers: Workers,
) -> None:
    """treadle 0.1 checkpointed each model request as a DBOS step; this version keeps the
    answer with the event log. A run 0.1 began — killed inside its second tool call, its
    first two answers and first tool result checkpointed (the database as it left it, in
    ``tests/fixtures/durable``) — is recovered as it began: no checkpointed request is
    sent again and the finished call does not run again."""
    url, server_log = model_server
    path = tmp_path / "durable.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(UPGRADE.read_text())
    with sqlite3.connect(path) as db:  # the 0.1 layout: requests are DBOS steps
        steps = db.execute("select function_name from operation_outputs").fetchall()
    assert steps == [("treadle.model",), ("treadle.model",)]
    tools_log = tmp_path / "tools.log"
    result = finish(workers.start(f"sqlite:///{path}", url, tools_log, "recover", "legacy"))
    assert result.reason == "completed" and result.text == FINAL
    validate_transcript(result.messages)
    requests = [line for line in lines(server_log) if line.startswith("request")]
    assert requests == ["request legacy:2", "request legacy:3"]  # 0 and 1 replayed
    assert lines(tools_log) == [  # call-0 kept; call-1 was cut (idempotent: run again)
        "start legacy/call-1",
        "end legacy/call-1",
        "start legacy/call-2",
        "end legacy/call-2",
    ]
    events = events_of(f"sqlite:///{path}", "legacy")
    assert [e["seq"] for e in events] == list(range(len(events)))
    ends = [e for e in events if e["type"] == "tool_execution_end"]
    assert [e["tool_call_id"] for e in ends] == ["call-0", "call-1", "call-2"]


def test_a_request_retried_before_a_crash_is_not_sent_again(
    tmp_path: Path,
    model_server: tuple[str, Path],
    workers: Workers,
) -> None:
    """The run's first response is cut halfway (the connection dropped) and the request
    retried; the worker is then killed inside the second tool call. However many attempts
    a request took, its answer is one checkpoint: the recovered worker sends neither
    answered request again, and the events read as one run (the retry kept once)."""
    url, server_log = model_server
    db = f"sqlite:///{tmp_path / 'durable.sqlite'}"
    tools_log = tmp_path / "tools.log"
    first = workers.start(db, url, tools_log, "start", "flaky")
    second = workers.ahead(db, url, tools_log, "flaky")
    kill_when(
        lambda: wait_for(lambda: KILL_POINTS["inside a tool"](server_log, tools_log, "flaky")),
        first,
        second,
    )
    assert lines(server_log)[:3] == ["request flaky:0", "cut flaky:0", "request flaky:0"]
    result = finish(go(second))
    check(result, server_log, tools_log, "flaky")
    assert lines(server_log).count("request flaky:0") == 2  # the cut one and its retry only
    events = events_of(db, "flaky")
    assert [e["seq"] for e in events] == list(range(len(events)))
    types = [e["type"] for e in events]
    assert types.count("provider_retry") == 1 and types.count("agent_start") == 1
    assert [e["tool_call_id"] for e in events if e["type"] == "tool_execution_end"] == [
        "call-0",
        "call-1",
        "call-2",
    ]


def test_a_sub_agent_cut_by_a_crash_ends_cancelled_in_the_stored_events(
    tmp_path: Path,
    model_server: tuple[str, Path],
    workers: Workers,
) -> None:
    """A plain sub-agent (``Agent.as_tool``) is one tool call, not marked idempotent: killed
    while it streams, it is not run again (its call is answered ``UNKNOWN_OUTCOME``). Its
    loop, whose first events were stored, ends in the stored events as a cancelled loop
    would, right where they stopped: a reader never sees it running for ever."""
    url, server_log = model_server
    db = f"sqlite:///{tmp_path / 'durable.sqlite'}"
    tools_log = tmp_path / "tools.log"
    first = workers.start(db, url, tools_log, "start", "sub", AGENT="delegating")
    second = workers.ahead(db, url, tools_log, "sub", AGENT="delegating")

    def helper_streaming() -> bool:
        stored = stored_events(tmp_path / "durable.sqlite")
        return any(e["depth"] == 1 for e in stored) and "completed sub-helper:0" not in lines(
            server_log
        )

    kill_when(lambda: wait_for(helper_streaming), first, second)
    cut = {e["seq"] for e in stored_events(tmp_path / "durable.sqlite")}
    result = finish(go(second))
    assert result.reason == "completed" and result.text == FINAL
    validate_transcript(result.messages)
    answers = {m.tool_call_id: m for m in result.messages if m.role == "tool_result"}
    assert answers["call-h"].is_error and answers["call-h"].text == UNKNOWN_OUTCOME
    requests = [line for line in lines(server_log) if line.startswith("request sub-helper")]
    assert requests == ["request sub-helper:0"]  # never sent again

    events = checks.events_of(db, "sub")
    checks.check_run_events(events)  # every loop whole: the helper's too
    helper = [e for e in events if e.depth == 1]
    assert helper[0].type == "agent_start" and helper[-1].type == "agent_end"
    assert helper[-1].reason == "cancelled"  # type: ignore[attr-defined]
    assert max(cut) < helper[-1].seq  # closed by the recovered execution

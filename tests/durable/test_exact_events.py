"""What a user watches is as exact as what a durable run does, on SQLite and PostgreSQL:
runs with parallel tool calls killed twice at random moments read as one valid run (each
step's events once, ``seq`` strictly increasing) for a reader who follows them across the
crashes; a reader in another process sees a tool start while the tool runs; a run that
waited for three approvals, decided by a third process, returns the same result as an
uninterrupted ``Agent.run``."""

from __future__ import annotations

import asyncio
import random
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.launched import Launch

from treadle import AgentEvent, RunResult, durable
from treadle.context import validate_transcript

from .checks import check_run_events, events_of, stretches
from .fake_model import FINAL
from .processes import Workers, go

# each test starts, kills and restarts worker processes: long, so scheduled first
pytestmark = pytest.mark.slow


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def wait_for(what: str, condition: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.005)


def kill(process: Launch) -> None:
    """SIGKILL the worker where it is (its own process, at once)."""
    assert process.poll() is None, "the worker ended before it could be killed"
    process.kill_script()
    assert process.returncode == -signal.SIGKILL, "the worker ended before it could be killed"


def finish(process: Launch) -> RunResult[Any]:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err[-3000:]
    return RunResult.model_validate_json(out.strip().splitlines()[-1])


class Follower:
    """A reader in this process that follows ``run.events()`` from before the first crash
    to the end, resuming with ``after=`` its last ``seq`` whenever its read fails."""

    def __init__(self, db: str, run_id: str) -> None:
        self.db, self.run_id = db, run_id
        self.events: list[AgentEvent] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            asyncio.run(self._follow())
        except BaseException as exc:  # reported by join()
            self.error = exc

    async def _follow(self) -> None:
        durable.connect(self.db)
        run = durable.DurableRun(self.run_id)
        while True:
            after = self.events[-1].seq if self.events else None
            try:
                async for event in run.events(after=after, poll_s=0.01):
                    self.events.append(event)
                return
            except LookupError:  # not created yet
                await asyncio.sleep(0.05)

    def join(self) -> list[AgentEvent]:
        self.thread.join(120)
        assert not self.thread.is_alive(), "the follower never saw the run end"
        if self.error is not None:
            raise self.error
        return self.events


@pytest.mark.parametrize("seed", [11, 22, 33])
def test_parallel_calls_killed_twice_read_as_one_valid_run(
    seed: int,
    database: str,
    tmp_path: Path,
    model_server: tuple[str, Path],
    workers: Workers,
) -> None:
    url, server_log = model_server
    tools_log = tmp_path / "tools.log"
    run_id = f"par-{seed}"  # "par": two parallel calls a turn, the first slower
    env = {"TOOL_SLEEP": "0.2", "EXECUTOR_ID": f"crash-{seed}"}
    rng = random.Random(seed)
    first = workers.start(database, url, tools_log, "start", run_id, **env)
    second, third = workers.ahead(database, url, tools_log, run_id, **env), None
    try:
        wait_for("the first request", lambda: f"request {run_id}:0" in lines(server_log))
        follower = Follower(database, run_id)
        time.sleep(rng.uniform(0.05, 1.2))
        kill(first)
        progress = len(lines(server_log)) + len(lines(tools_log))
        go(second)
        third = workers.ahead(database, url, tools_log, run_id, **env)
        wait_for(
            "the recovered run's progress",
            lambda: len(lines(server_log)) + len(lines(tools_log)) > progress,
        )
        time.sleep(rng.uniform(0.0, 0.3))
        kill(second)
        result = finish(go(third))
    finally:
        for process in (first, second, third):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(10)

    assert result.reason == "completed" and result.text == FINAL
    validate_transcript(result.messages)
    assert len(result.messages) == 1 + 3 * 3 + 1  # prompt, 3 x (answer, 2 results), final
    followed = follower.join()
    stored = events_of(database, run_id)
    check_run_events(stored)
    assert [e.model_dump() for e in followed] == [e.model_dump() for e in stored]
    calls = {e.tool_call_id for e in stored if e.type == "tool_execution_end"}  # type: ignore[union-attr]
    assert calls == {f"call-{k}{part}" for k in range(3) for part in "ab"}
    end = stored[-1]
    assert end.type == "agent_end" and len(end.messages) == len(result.messages)  # type: ignore[union-attr]


def test_a_reader_in_another_process_sees_a_tool_start_while_the_tool_runs(
    database: str,
    tmp_path: Path,
    model_server: tuple[str, Path],
    workers: Workers,
) -> None:
    url, server_log = model_server
    tools_log = tmp_path / "tools.log"
    running = workers.start(database, url, tools_log, "start", "live-1", TOOL_SLEEP="4")
    try:
        wait_for("the first request", lambda: "request live-1:0" in lines(server_log))
        durable.connect(database)

        async def first_tool_start() -> tuple[AgentEvent, float, list[str]]:
            run = durable.DurableRun("live-1")
            while True:  # poll the stored events as a UI would
                stored = [e async for e in _stored(run)]
                for event in stored:
                    if event.type == "tool_execution_start":
                        return event, time.time(), [e.type for e in stored]
                await asyncio.sleep(0.005)

        event, seen_at, types = asyncio.run(first_tool_start())
        # the tool (4 s) is still running: the reader saw its start as it happened
        assert "end live-1/call-0" not in lines(tools_log)
        assert "tool_execution_end" not in types
        assert types.count("message_end") == 2  # the prompt and the answer calling the tool
        latency_ms = seen_at * 1000 - event.timestamp
        print(f"\ntool_execution_start seen by another process {latency_ms:.0f} ms after it")
    finally:
        running.kill()
        running.wait(10)


async def _stored(run: durable.DurableRun) -> Any:
    """The events stored so far (no waiting for more)."""
    from treadle.durable._connection import require

    for event in await require("events").read(run.run_id, -1, None):
        yield event


def _comparable(result: RunResult[Any]) -> list[dict[str, Any]]:
    out = []
    for message in result.messages:
        out.append(message.model_dump(mode="json", exclude={"timestamp", "response_id"}))
    return out


def test_a_run_that_waited_for_three_approvals_returns_the_whole_run(
    database: str,
    tmp_path: Path,
    model_server: tuple[str, Path],
    workers: Workers,
) -> None:
    url, _ = model_server
    tools_log = tmp_path / "tools.log"
    serving = workers.start(database, url, tools_log, "serve", "-")
    try:
        assert serving.stdout.readline().strip() == "ready", serving.stderr.read()
        approver = workers.start(database, url, tools_log, "approve", "careful-1")

        async def go() -> RunResult[Any]:
            durable.connect(database)
            run = await durable.enqueue(
                "careful", "Run the three steps. [careful-1]", run_id="careful-1"
            )
            return await run.result()

        result = asyncio.run(go())
        approver.communicate(timeout=60)
        assert approver.returncode == 0
    finally:
        serving.send_signal(signal.SIGTERM)
        serving.wait(20)
    plain = finish(workers.start(database, url, tools_log, "plain", "careful-1"))
    assert plain.reason == "completed" and len(plain.messages) == 8
    assert result.reason == plain.reason == "completed"
    assert _comparable(result) == _comparable(plain)
    assert result.usage == plain.usage
    answers = [m for m in result.messages if m.role == "assistant"]
    assert result.usage.input == sum(m.usage.input for m in answers) > 0  # type: ignore[attr-defined]
    validate_transcript(result.messages)

    # One run to a UI: a stretch per wait, each a valid loop, the first three suspended on
    # the call the next one runs; the next stretch continues the same history.
    events = events_of(database, "careful-1")
    check_run_events(events, stretch_count=4)
    parts = stretches(events)
    for n, part in enumerate(parts[:-1]):
        assert part[-1].pending_tool_calls == [f"call-{n}"]  # type: ignore[attr-defined]
        nxt = parts[n + 1]
        assert nxt[0].continuation_kind == "default"  # type: ignore[attr-defined]
        started = [e.tool_call_id for e in nxt if e.type == "tool_execution_start"]  # type: ignore[attr-defined]
        assert started == [f"call-{n}"]
    ended = [m for part in parts for m in part[-1].messages]  # type: ignore[attr-defined]
    assert [m.role for m in ended] == [m.role for m in result.messages]

"""SIGKILL at random moments: every message whose message_end was seen is on disk, the
history validates after repair, and the session resumes correctly. The child runs as
``python crash_child.py``, forked from the worker's preloader (tests/conftest.py), and is
killed where it stands: a SIGKILL to its own process (tests/launched.py)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from crash_child import REPORT, provider, work
from tests.launched import Launch
from tests.preloaded import Preloader

from treadle import Agent
from treadle.context import validate_transcript
from treadle.sessions import open_store
from treadle.types import FileContent, message_from_dict

CHILD = Path(__file__).with_name("crash_child.py")
SESSION = "crash-test"
ITERATIONS = 4

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


def run_and_kill(
    location: Path, rng: random.Random, preloader: Preloader
) -> tuple[int, list[str], bool]:
    """Start the child, kill it after a random number of message_ends plus a random pause.
    Returns (messages it resumed with, the printed messages as JSON, whether it finished)."""
    child = Launch(
        preloader,
        CHILD,
        str(location),
        SESSION,
        "6",
        folder=str(location.parent),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    lines: list[dict[str, Any]] = []
    kill_after = rng.randint(0, 30)
    try:
        while True:
            line = child.stdout.readline()
            if not line:
                break
            lines.append(json.loads(line))
            if sum("end" in item for item in lines) >= kill_after:
                time.sleep(rng.uniform(0, 0.02))
                child.kill_script()
                break
        rest, errors = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    lines += [json.loads(line) for line in rest.splitlines() if line.strip()]
    assert lines and "resumed" in lines[0], errors
    finished = any("done" in item for item in lines)
    assert finished or child.returncode == -signal.SIGKILL, errors
    printed = [message_from_dict(item["end"]).model_dump_json() for item in lines if "end" in item]
    return int(lines[0]["resumed"]), printed, finished


def is_subsequence(items: list[str], of: list[str]) -> bool:
    rest = iter(of)
    return all(item in rest for item in items)


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_killed_at_random_moments(tmp_path: Path, kind: str, server_preloader: Preloader) -> None:
    location = tmp_path / ("sessions" if kind == "jsonl" else "sessions.db")
    rng = random.Random(f"treadle-crash-{kind}")
    expected_resume = 0
    for _ in range(ITERATIONS):
        resumed, printed, _finished = run_and_kill(location, rng, server_preloader)
        assert resumed == expected_resume  # it picked up the repaired history we saw
        store = open_store(location)
        raw = [m.model_dump_json() for m in store.load(SESSION, repair=False).messages]
        assert is_subsequence(printed, raw), "a message reported as ended was lost"
        loaded = store.load(SESSION)  # no SessionBlobError: every file precedes its record
        assert validate_transcript(loaded.messages) == []
        files = [b for m in loaded.messages if m.role != "assistant" for b in m.content]
        reports = [b for b in files if isinstance(b, FileContent) and b.name == "report.pdf"]
        assert all(b.raw() == REPORT for b in reports)
        expected_resume = len(loaded.messages)
        store.close()

    async def resume() -> None:
        agent: Agent[Any] = Agent(
            provider(0), tools=[work], store=open_store(location), session_id=SESSION
        )
        assert len(agent.messages) == expected_resume
        if agent.messages[-1].role != "assistant":  # killed mid-turn: finish that turn
            assert (await agent.continue_()).text == "all done"
        result = await agent.run("one more")
        assert result.reason == "completed" and result.text == "all done"
        agent.close()
        final = open_store(location).load(SESSION)
        assert [m.model_dump_json() for m in final.messages] == [
            m.model_dump_json() for m in agent.messages
        ]
        assert validate_transcript(final.messages) == [] and final.repaired_tool_calls == []

    anyio.run(resume, backend="trio" if kind == "sqlite" else "asyncio")

"""When the disk fills (here: a file-size limit, RLIMIT_FSIZE) every message that was
reported with message_end before the failure is in the store, and the run ends with an
error that names the store — never a raw OSError."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests.preloaded import Preloader

CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys
    import anyio
    from treadle import AgentContext, AgentLoopConfig, AssistantMessage, Hooks, ToolCall
    from treadle import agent_loop, tool
    from treadle.sessions import JsonlStore, SessionRecorder
    from treadle.testing import ScriptedProvider

    @tool
    def fill(n: int) -> str:
        '''Returns a long text.'''
        return "x" * 600

    class Reported(Hooks):
        def __init__(self): self.ids = []
        def on_event(self, run, event):
            if event.type == "message_end":
                self.ids.append(event.message.timestamp)

    async def main():
        store = JsonlStore(sys.argv[1])
        context = AgentContext(tools=[fill])
        recorder = SessionRecorder.open(store, context, session_id="disk")
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4000, hard))
        turns = [
            AssistantMessage(content=[ToolCall(id=f"c{i}", name="fill", arguments={"n": i})])
            for i in range(20)
        ]
        reported = Reported()
        provider = ScriptedProvider([*turns, "done"])
        config = AgentLoopConfig(provider=provider, hooks=[recorder, reported])
        new = await agent_loop("go", context, config)
        end_error = context.state.get("treadle.last_error")
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        print(json.dumps({
            "reported": reported.ids,
            "history": [m.timestamp for m in context.messages],
            "error": end_error.message if end_error else None,
        }))

    anyio.run(main)
    """
)


def test_reported_messages_are_stored_when_the_disk_fills(
    tmp_path: Path, server_preloader: Preloader
) -> None:
    if sys.platform != "linux":
        pytest.skip("RLIMIT_FSIZE and SIGXFSZ are set the Linux way here")
    # python -c CHILD, forked from the worker's preloader (it has imported treadle)
    done = subprocess.run(
        server_preloader.command("-c", CHILD, str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["error"] is not None and "session store could not write" in outcome["error"]
    assert "OSError" in outcome["error"] or "File too large" in outcome["error"]

    from treadle.sessions import JsonlStore

    stored = [m.timestamp for m in JsonlStore(tmp_path).load("disk", repair=False).messages]
    history, reported = outcome["history"], outcome["reported"]
    assert len(stored) < len(history)  # the limit really was hit
    # what is stored is exactly the history up to the failing write: every message reported
    # before it is there, in order; what came after is what the run's error reports lost
    assert stored == history[: len(stored)]
    assert reported[: len(stored)] == stored

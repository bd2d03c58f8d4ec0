"""``run_sync`` interrupted (Ctrl-C, a notebook's interrupt button): the run stops, its
history is closed and kept, the agent takes the next run at once, and the user sees one
line — in a script, and in a cell whose thread already runs an event loop (where the run
has a worker thread of its own). Each case runs in a fresh interpreter that sends itself a
real SIGINT once the model has started answering."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

PRELUDE = textwrap.dedent(
    """
    import asyncio, os, signal, threading, time, warnings
    # SIGINT as a terminal's Python has it, whatever the test process passed on (an ignored
    # SIGINT or a blocked one is inherited by a child: a library an earlier test used in
    # this worker may have left it so, and the run would then never be interrupted)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    print("INHERITED", signal.getsignal(signal.SIGINT), sorted(blocked))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from treadle import Agent, Hooks
    from treadle.testing import ScriptedProvider

    class Interrupt(Hooks):
        # a real SIGINT to this process once the answer has started streaming
        def on_event(self, run, event):
            if event.type == "message_update" and not fired:
                fired.append(1)
                threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()

    fired = []
    slow = ScriptedProvider(["word " * 400, "second answer"], chunks=400, delay=0.05)  # ~20 s
    agent = Agent(slow, hooks=[Interrupt()])
    """
)

REPORT = textwrap.dedent(
    """
    print("RUNNING", agent.running)
    roles = [(m.role, getattr(m, "stop_reason", None)) for m in agent.messages]
    print("HISTORY", roles)
    print("NEXT", agent.run_sync("again").text)
    """
)


def run(script: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONWARNINGS="default")
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(script) + REPORT],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def check(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "CAUGHT treadle: interrupted" in out, out
    assert "RUNNING False" in out
    assert "('user', None), ('assistant', 'aborted')" in out, out
    assert "NEXT second answer" in out, out


def test_interrupting_run_sync_in_a_cell_stops_the_run() -> None:
    # A notebook cell: this thread runs an event loop (no asyncio.run SIGINT handler, as in
    # ipykernel, so the interrupt is a KeyboardInterrupt in this thread).
    done = run(
        """
        async def cell():
            try:
                agent.run_sync("hi")
            except KeyboardInterrupt as exc:
                print("CAUGHT", exc)
                assert exc.__cause__ is None and exc.__suppress_context__

        loop = asyncio.new_event_loop()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # no ipykernel here
            loop.run_until_complete(cell())
        """
    )
    check(done)


def test_interrupting_run_sync_in_a_script_is_one_line() -> None:
    done = run(
        """
        try:
            agent.run_sync("hi")
        except KeyboardInterrupt as exc:
            print("CAUGHT", exc)
            assert exc.__cause__ is None and exc.__suppress_context__
        """
    )
    check(done)


def test_run_sync_inside_async_code_warns_that_it_blocks_the_loop() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-W",
            "error::RuntimeWarning",
            "-c",
            textwrap.dedent(
                """
                import asyncio
                from treadle import Agent
                from treadle.testing import ScriptedProvider

                async def handler():
                    Agent(ScriptedProvider(["ok"])).run_sync("hi")

                try:
                    asyncio.run(handler())
                except RuntimeWarning as warning:
                    print("WARNED", warning)
                """
            ),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "WARNED run_sync() was called inside a running event loop" in done.stdout, (
        done.stdout + done.stderr
    )

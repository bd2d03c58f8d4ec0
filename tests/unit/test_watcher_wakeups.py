"""The watcher thread of unclosed-stream checks (``treadle.loop._watcher``) is woken only
when a new check comes before every waiting one: runs ending one after another each add a
later check, and waking the thread for each would cost every run thread CPU time and a GIL
hand-over."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import threading, time
    import anyio
    from treadle.loop import _watcher

    notified = []

    class Counting(threading.Condition):
        def notify(self, n=1):
            notified.append(n)
            super().notify(n)

    _watcher._wake = Counting(threading.Lock())
    checked = []
    real_check = _watcher._check

    def check(ref, state, runs, delay):
        checked.append(time.monotonic())
        real_check(ref, state, runs, delay)

    _watcher._check = check

    class State:
        active = 0
        runs = 1
        watching = False

    streams = [anyio.create_memory_object_stream(1) for _ in range(40)]
    for send, _ in streams:  # one run after another: each check is due after the others
        _watcher.watch(send, State(), 0.4)
    print("later", len(notified))
    _watcher.watch(streams[0][0], State(), 0.05)  # due before all of them: wake up
    print("earlier", len(notified))
    end = time.monotonic() + 5
    while _watcher.pending() and time.monotonic() < end:
        time.sleep(0.01)
    print("checked", len(checked))
    """
)


def test_the_watcher_wakes_only_for_a_check_due_before_the_others() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    out = dict(line.split() for line in done.stdout.splitlines())
    assert out["later"] == "0"  # the first check started the thread; none woke it
    assert out["earlier"] == "1"
    assert out["checked"] == "41"  # and every check is still made

"""A script started from a preloader (tests/preloaded.py) that a test can kill where it
stands: the launch writes the script's own pid to a file, so the test signals the script
there and then, not through the launch and the relay that watches it (which would add the
time they take to be scheduled)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from typing import Any

from tests.preloaded import Preloader


class Launch(subprocess.Popen[str]):
    """``python script args`` started from ``preloader`` (``Popen`` options as keywords, text
    mode), whose script can be killed where it stands: ``kill_script()`` SIGKILLs the
    script's own process (its pid as the launch wrote it to a file in ``folder``), then
    waits for the launch, which exits killed by it as ``python script`` would."""

    def __init__(
        self,
        preloader: Preloader,
        script: str | os.PathLike[str],
        *args: str,
        folder: str,
        **popen: Any,
    ) -> None:
        self.pid_file = os.path.join(folder, f"launch-{uuid.uuid4().hex}.pid")
        super().__init__(
            preloader.command(script, *args, pid_file=self.pid_file), text=True, **popen
        )

    def script_pid(self, timeout: float = 60) -> int:
        """The script's own pid (the launch's where it is the plain ``python script``)."""
        if not Preloader.available():
            return self.pid
        deadline = time.monotonic() + timeout  # a guard against a hang: it comes at start
        while not os.path.exists(self.pid_file):
            if self.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the launch never told its script's pid ({self.args!r})")
            time.sleep(0.002)
        with open(self.pid_file) as told:
            return int(told.read())

    def kill_script(self) -> None:
        """SIGKILL the script at once, where it is; return once the launch has ended (with
        ``returncode`` -SIGKILL, or the script's own status if it had ended already)."""
        try:
            os.kill(self.script_pid(), signal.SIGKILL)
        except ProcessLookupError:  # it had ended (and been reaped)
            pass
        self.wait(10)

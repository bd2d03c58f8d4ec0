"""Progress of an eval run: a ``rich`` bar when it is installed and standard error is a
terminal, else a line per finished sample; or the caller's function."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol, TextIO

from ..errors import UsageError
from .results import SampleResult


class Progress(Protocol):
    def start(self, total: int) -> None: ...

    def advance(self, done: int, total: int, sample: SampleResult) -> None: ...

    def stop(self) -> None: ...


class NoProgress:
    def start(self, total: int) -> None:
        pass

    def advance(self, done: int, total: int, sample: SampleResult) -> None:
        pass

    def stop(self) -> None:
        pass


def sample_line(done: int, total: int, sample: SampleResult) -> str:
    verdict = "ERROR" if sample.error else "pass" if sample.passed else "FAIL"
    width = len(str(total))
    return (
        f"[{done:>{width}}/{total}] {verdict:5} {sample.score:.2f}  {sample.case} · "
        f"{sample.model} #{sample.repeat + 1}" + (f"  ({sample.error})" if sample.error else "")
    )


class LineProgress(NoProgress):
    """A line per finished sample."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out

    def advance(self, done: int, total: int, sample: SampleResult) -> None:
        print(sample_line(done, total, sample), file=self.out or sys.stderr, flush=True)


class CallbackProgress(NoProgress):
    def __init__(self, fn: Callable[[int, int, SampleResult], Any]) -> None:
        self.fn = fn

    def advance(self, done: int, total: int, sample: SampleResult) -> None:
        self.fn(done, total, sample)


class RichProgress(NoProgress):
    """A ``rich`` progress bar on standard error, with a line per failed sample above it."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.console = Console(stderr=True)
        self.bar = Progress(
            TextColumn("eval"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[passed]} passed"),
            console=self.console,
            transient=True,
        )
        self.task: Any = None
        self.passed = 0

    def start(self, total: int) -> None:
        self.bar.start()
        self.task = self.bar.add_task("eval", total=total, passed=0)

    def advance(self, done: int, total: int, sample: SampleResult) -> None:
        self.passed += sample.passed
        if not sample.passed:
            self.console.print(sample_line(done, total, sample), markup=False, highlight=False)
        self.bar.update(self.task, completed=done, passed=self.passed)

    def stop(self) -> None:
        self.bar.stop()


def make_progress(value: Any) -> Progress:
    if value is None or value is False:
        return NoProgress()
    if value is True:
        try:
            import rich  # noqa: F401
        except ImportError:
            return LineProgress()
        return RichProgress() if sys.stderr.isatty() else LineProgress()
    if all(hasattr(value, m) for m in ("start", "advance", "stop")):
        progress: Progress = value
        return progress
    if callable(value):
        return CallbackProgress(value)
    raise UsageError(f"progress is True, a function (done, total, sample) or None, not {value!r}")

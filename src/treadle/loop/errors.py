"""Internal signals of the loop (never seen by callers: the run ends with a reason)."""

from __future__ import annotations

from ..errors import TreadleError


class HookFailed(TreadleError):
    """A hook or callback raised, or returned something it must not."""

    def __init__(self, where: str, original: BaseException) -> None:
        super().__init__(f"{where} raised {type(original).__name__}: {original}")
        self.where = where
        self.original = original

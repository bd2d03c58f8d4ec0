"""CancellationToken: a cooperative stop signal that any thread may raise."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

CancelMode = Literal["immediate", "after_turn"]


class CancellationToken:
    """Asks a running loop to stop.

    ``cancel("immediate")`` stops the in-flight model call and running tools now; every tool
    call still gets a result (``Cancelled``). ``cancel("after_turn")`` lets the current turn
    finish, tools included, and makes no further model call. An ``after_turn`` request may be
    raised to ``immediate`` later; the reverse is ignored.

    ``cancel`` is safe to call from any thread, including a sync tool's worker thread.
    A token may be shared by several loops (a parent and its sub-agents).
    """

    __slots__ = ("_callbacks", "_lock", "_mode", "_reason")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._mode: CancelMode | None = None
        self._reason: str | None = None
        self._callbacks: list[Callable[[CancelMode], None]] = []

    @property
    def cancelled(self) -> bool:
        """True once any cancellation was requested."""
        return self._mode is not None

    @property
    def mode(self) -> CancelMode | None:
        return self._mode

    @property
    def immediate(self) -> bool:
        return self._mode == "immediate"

    @property
    def reason(self) -> str | None:
        return self._reason

    def cancel(self, mode: CancelMode = "immediate", reason: str | None = None) -> None:
        """Request cancellation. Idempotent; ``immediate`` wins over ``after_turn``."""
        if mode not in ("immediate", "after_turn"):
            raise ValueError(f"cancel mode must be 'immediate' or 'after_turn', not {mode!r}")
        with self._lock:
            if self._mode == "immediate" or self._mode == mode:
                return
            self._mode = mode
            self._reason = reason
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback(mode)

    def subscribe(self, callback: Callable[[CancelMode], None]) -> Callable[[], None]:
        """Call ``callback(mode)`` on every future escalation; returns an unsubscribe function.

        The callback runs in the thread that called :meth:`cancel`.
        """
        with self._lock:
            self._callbacks.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                try:
                    self._callbacks.remove(callback)
                except ValueError:
                    pass

        return unsubscribe

    def __repr__(self) -> str:
        return f"CancellationToken(mode={self._mode!r})"

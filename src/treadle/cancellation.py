"""Cancellation, in one place: :class:`CancellationToken`, the cooperative stop signal any
thread may raise, and :class:`CancelBridge`, which turns it into anyio cancel scopes in the
loop's thread (cancel scopes may only be cancelled from there)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Literal

import anyio
import anyio.lowlevel

from .errors import ConfigurationError

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
            raise ConfigurationError(
                f"cancel mode must be 'immediate' or 'after_turn', not {mode!r}"
            )
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


class CancelBridge:
    """Cancels the registered scope when the token asks for an immediate stop.

    ``CancellationToken.cancel`` may run in any thread; scopes may only be cancelled from
    the event loop's thread, so foreign calls are handed over with ``from_thread``.
    """

    def __init__(self, token: CancellationToken | None) -> None:
        self.token = token
        self._scopes: list[anyio.CancelScope] = []
        self._thread = threading.get_ident()
        # Only a token can cancel from another thread, which needs the loop's token.
        self._loop_token = anyio.lowlevel.current_token() if token is not None else None
        self._unsubscribe: Callable[[], None] | None = (
            token.subscribe(self._on_cancel) if token is not None else None
        )

    @property
    def immediate(self) -> bool:
        return self.token is not None and self.token.immediate

    @property
    def after_turn(self) -> bool:
        return self.token is not None and self.token.cancelled

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def scope(self) -> AbstractContextManager[object]:
        """A cancel scope that an immediate cancellation cancels (already cancelled if it
        came); without a token nothing can, so no scope is made (it costs several µs on
        asyncio, and a run makes one per model call and per tool batch)."""
        if self.token is None:
            return nullcontext()
        return _Registered(self)

    def _cancel_all(self) -> None:
        for scope in list(self._scopes):
            scope.cancel()

    def _on_cancel(self, mode: CancelMode) -> None:
        if mode != "immediate":
            return
        if threading.get_ident() == self._thread:
            self._cancel_all()
            return
        # Hand over without waiting: cancel() only signals, even when the loop is busy
        # (a blocking call in a tool) or gone; a helper thread waits for the loop instead.
        threading.Thread(target=self._hand_over, name="treadle-cancel", daemon=True).start()

    def _hand_over(self) -> None:
        import anyio.from_thread  # here: it costs import time, and most runs never need it

        try:
            anyio.from_thread.run_sync(self._cancel_all, token=self._loop_token)
        except RuntimeError:
            pass  # the event loop is gone: nothing left to cancel


class _Registered:
    __slots__ = ("_bridge", "scope")

    def __init__(self, bridge: CancelBridge) -> None:
        self._bridge = bridge
        self.scope = anyio.CancelScope()

    def __enter__(self) -> anyio.CancelScope:
        self._bridge._scopes.append(self.scope)
        if self._bridge.immediate:
            self.scope.cancel()
        self.scope.__enter__()
        return self.scope

    def __exit__(self, *exc: object) -> bool:
        self._bridge._scopes.remove(self.scope)
        return bool(self.scope.__exit__(*exc))  # type: ignore[arg-type]

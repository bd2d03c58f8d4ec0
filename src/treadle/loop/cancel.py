"""Bridge a thread-safe CancellationToken to anyio cancel scopes in the loop's thread."""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio
import anyio.from_thread
import anyio.lowlevel

from .._cancel import CancellationToken, CancelMode


class CancelBridge:
    """Cancels the registered scope when the token asks for an immediate stop.

    ``CancellationToken.cancel`` may run in any thread; scopes may only be cancelled from
    the event loop's thread, so foreign calls are handed over with ``from_thread``.
    """

    def __init__(self, token: CancellationToken | None) -> None:
        self.token = token
        self._scopes: list[anyio.CancelScope] = []
        self._thread = threading.get_ident()
        self._loop_token = anyio.lowlevel.current_token()
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

    def scope(self) -> _Registered:
        """A cancel scope that an immediate cancellation cancels (already cancelled if it came)."""
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

"""The one exception type of ``treadle.mcp``, and how a failure is described in it."""

from __future__ import annotations

from collections.abc import Iterable

import anyio

from ..errors import TreadleError
from .convert import scrub


class MCPError(TreadleError, RuntimeError):
    """An MCP server could not be reached, started or used.

    The message names the server and where it is (the URL without credentials, or the
    command), what was being done, the HTTP status when there was one and the cause
    (``ConnectError: All connection attempts failed``) — never an exception group. The same
    facts are attributes: ``server`` (its name), ``where``, ``status`` (an HTTP status code
    or ``None``) and ``cause`` (the cause's text, credentials redacted)."""

    def __init__(
        self,
        message: str,
        *,
        server: str = "",
        where: str = "",
        status: int | None = None,
        cause: str = "",
    ) -> None:
        super().__init__(message)
        self.server = server
        self.where = where
        self.status = status
        self.cause = cause


def root_cause(exc: BaseException) -> BaseException:
    """The exception behind ``exc``: the first that is not cancellation inside (nested)
    exception groups, which anyio's task groups wrap a transport's failure in."""
    cancelled = anyio.get_cancelled_exc_class()
    while True:
        members = getattr(exc, "exceptions", None)
        if not isinstance(members, tuple) or not members:
            return exc
        real = [m for m in members if not isinstance(m, cancelled)]
        exc = (real or list(members))[0]


def describe(exc: BaseException, secrets: Iterable[str]) -> str:
    """``Type: message`` of ``exc``'s root cause, with every secret redacted."""
    cause = root_cause(exc)
    name = type(cause).__name__
    text = str(cause).strip()
    if name == "MCPError" and text and type(cause).__module__.startswith("mcp."):
        return scrub(text, secrets)  # the SDK's error: its message says it all
    if isinstance(cause, TimeoutError) and not text:
        text = "no answer in time"
    return scrub(f"{name}: {text}" if text else name, secrets)

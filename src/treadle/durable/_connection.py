"""This process's connection to the durable database: what :func:`connect` /
:func:`launch` set up, read by the runs' handles."""

from __future__ import annotations

from typing import Any, Protocol

from ..cancellation import CancelMode
from ._database import DurableError

STATE: dict[str, Any] = {}  # this connection: url, events, client, configured


class Registered(Protocol):
    """What the runtime and the handles need of a DurableAgent."""

    name: str
    agent: Any
    queue: Any
    queue_concurrency: int | None

    async def _execute(self, run_id: str, prompt: str) -> dict[str, Any]: ...

    async def _register_queue(self) -> None: ...

    def _stop(self, run_id: str, mode: CancelMode, *, early: bool = False) -> bool: ...

    def _forget_stop(self, run_id: str) -> None: ...


AGENTS: dict[str, Registered] = {}  # this process's DurableAgents by name


def require(key: str) -> Any:
    if key not in STATE:
        raise DurableError(
            "treadle.durable is not connected: call treadle.durable.launch() (to run) or "
            "treadle.durable.connect() (to read, approve, enqueue) first"
        )
    return STATE[key]

"""This process's connection to the durable database: what :func:`connect` /
:func:`launch` set up, read by the runs' handles."""

from __future__ import annotations

from typing import Any

from ._database import DurableError

STATE: dict[str, Any] = {}  # this connection: url, events, client, configured


def require(key: str) -> Any:
    if key not in STATE:
        raise DurableError(
            "treadle.durable is not connected: call treadle.durable.launch() (to run) or "
            "treadle.durable.connect() (to read, approve, enqueue) first"
        )
    return STATE[key]

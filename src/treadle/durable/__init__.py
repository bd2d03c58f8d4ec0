"""Durable execution on DBOS: runs that outlive a process and a machine (extra ``dbos``).

``DurableAgent(agent, name=...)`` runs an :class:`~treadle.Agent`'s runs as DBOS workflows:
each model request and each tool call is checkpointed (with the run's event log, or as a
DBOS step for a tool that must not run twice), so a run whose worker dies is finished by
the next worker (or the same one restarted) without repeating what completed. See
docs/durable.md.
"""

# ruff: noqa: E402  (the extra is checked before the modules that need it load)
from __future__ import annotations

from importlib.util import find_spec

from ..errors import MissingExtra, install_hint

# Checked without importing them: DBOS and SQLAlchemy load at connect()/launch().
for _name in ("dbos", "sqlalchemy"):
    if find_spec(_name) is None:  # pragma: no cover - the extra is not installed
        raise MissingExtra(
            f"treadle.durable needs DBOS ({_name} is missing): {install_hint('dbos')}"
        )

from ._agent import DurableAgent
from ._database import DEFAULT_CONNECT_TIMEOUT_S, DatabaseError, DurableError
from ._run import DurableRun
from ._runtime import connect, enqueue, launch, shutdown
from ._steps import UNKNOWN_OUTCOME
from ._workers import recover_orphans, worker

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "UNKNOWN_OUTCOME",
    "DatabaseError",
    "DurableAgent",
    "DurableError",
    "DurableRun",
    "connect",
    "enqueue",
    "launch",
    "recover_orphans",
    "shutdown",
    "worker",
]

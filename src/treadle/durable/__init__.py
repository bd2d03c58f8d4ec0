"""Durable execution on DBOS: runs that outlive a process and a machine (extra ``dbos``).

``DurableAgent(agent, name=...)`` runs an :class:`~treadle.Agent`'s runs as DBOS workflows:
each model request and each tool call is a step, so a run whose worker dies is finished by
the next worker (or the same one restarted) without repeating what completed. See
docs/durable.md.
"""

from __future__ import annotations

from ..errors import MissingExtra

try:
    import dbos as _dbos  # noqa: F401
    import sqlalchemy as _sqlalchemy  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise MissingExtra(
        f"treadle.durable needs DBOS ({exc.name or exc} is missing): pip install 'treadle[dbos]'"
    ) from exc

from ._agent import DurableAgent, DurableRun, connect, enqueue, launch, shutdown
from ._steps import UNKNOWN_OUTCOME
from ._workers import recover_orphans, worker

__all__ = [
    "UNKNOWN_OUTCOME",
    "DurableAgent",
    "DurableRun",
    "connect",
    "enqueue",
    "launch",
    "recover_orphans",
    "shutdown",
    "worker",
]

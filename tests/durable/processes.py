"""The processes of the durable tests — the worker (worker.py) and the fake model server
(fake_model.py) — started as ``python script.py`` would start them, but forked from a
per-worker preloader (tests/preloaded.py) that has imported treadle, DBOS, SQLAlchemy and
the database drivers: about 1.3 s of CPU each otherwise, and these tests start over a
hundred. A test kills a worker at a chosen point with ``kill_script()``: a SIGKILL to the
worker's own process, there and then (tests/launched.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.launched import Launch
from tests.preloaded import Preloader

HERE = Path(__file__).resolve().parent
WORKER = HERE / "worker.py"
FAKE_MODEL = HERE / "fake_model.py"

# what worker.py and fake_model.py import, and DBOS's launch on SQLite and PostgreSQL
PRELOADED = (
    "treadle",
    "treadle.agent.subagent",
    "treadle.context.catalog",
    "treadle.durable",
    "treadle.providers",
    "treadle.providers.openai_chat_stream",
    "treadle.testing",
    "dbos",
    "dbos._sys_db_sqlite",
    "dbos._sys_db_postgres",
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql.psycopg",
    "psycopg",
    "httpx",
    "httpcore",  # (imported by httpx's first client)
    "anyio._core._sockets",
    "anyio._backends._asyncio",
)


class Workers:
    """Starts worker.py processes (``MODE`` as its docstring says) from ``preloader``."""

    def __init__(self, preloader: Preloader, folder: Path) -> None:
        self.preloader, self.folder = preloader, folder

    def start(
        self, db: str, url: str, tools_log: Path, mode: str, run_id: str, **env: str
    ) -> Launch:
        """A worker (``env``: what it reads from its environment), its streams piped."""
        base = {k: v for k, v in os.environ.items() if k != "TREADLE_DURABLE_DB"}
        return Launch(
            self.preloader,
            WORKER,
            db,
            url,
            str(tools_log),
            mode,
            run_id,
            folder=str(self.folder),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=base | env,
        )

    def ahead(self, db: str, url: str, tools_log: Path, run_id: str, **env: str) -> Launch:
        """A worker to recover the run, started ahead while the one to be killed runs and
        launched by :func:`go` once that one is dead."""
        return self.start(db, url, tools_log, "recover", run_id, WAIT_FOR_GO="1", **env)


def go(process: Launch) -> Launch:
    """Let a worker started :meth:`Workers.ahead` launch (and so recover)."""
    assert process.stdin is not None
    process.stdin.write("go\n")
    process.stdin.flush()
    return process

"""A throwaway PostgreSQL cluster on 127.0.0.1 for the tests: Debian's ``initdb`` and
``pg_ctl`` on a temporary directory, run as a non-root user (PostgreSQL refuses root),
removed afterwards."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


def find_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _as_user() -> tuple[list[str], int | None]:
    """The command prefix that runs a program as a non-root user, and that user's uid."""
    if os.geteuid() != 0:
        return [], None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        runuser = shutil.which("runuser")
        if runuser:
            return [runuser, "-u", name, "--"], entry.pw_uid
    raise RuntimeError("running as root and no non-root user (postgres, nobody) to run PostgreSQL")


@contextmanager
def cluster() -> Iterator[str]:
    """Start a cluster and yield its URL (``postgresql://treadle@127.0.0.1:PORT/postgres``)."""
    initdb, pg_ctl = find_bin("initdb"), find_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise FileNotFoundError(
            "PostgreSQL is not installed (Debian: apt-get install postgresql; "
            "scripts/install-system-deps.sh does it)"
        )
    prefix, uid = _as_user()
    root = tempfile.mkdtemp(prefix="treadle-pg-")
    data = os.path.join(root, "data")
    if uid is not None:
        os.chown(root, uid, -1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = lambda *args: subprocess.run(  # noqa: E731
        [*prefix, *args], check=True, capture_output=True, text=True, timeout=120
    )
    try:
        run(initdb, "-D", data, "-A", "trust", "-U", "treadle", "--no-sync")
        options = (
            f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        )
        run(pg_ctl, "-D", data, "-o", options, "-l", os.path.join(root, "log"), "-w", "start")
        try:
            yield f"postgresql://treadle@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run(
                [*prefix, pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"],
                capture_output=True,
                timeout=60,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)

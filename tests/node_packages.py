"""The Node packages of the tests that drive the official JavaScript clients (tests/ui/js,
tests/ui/js22) and the MCP conformance suite (tests/mcp/conformance), installed once per
lock file and kept across runs and clones.

``install(folder, needs)`` leaves ``folder/node_modules`` holding what
``folder/package-lock.json`` pins. A complete install already there is used as it is;
otherwise ``npm ci`` runs once in a cache folder named after the hash of the lock file
(``$TREADLE_TEST_CACHE``, else ``$XDG_CACHE_HOME/treadle-tests`` or
``~/.cache/treadle-tests``) and ``folder/node_modules`` becomes a link to it. A changed lock
file gets an install of its own; delete the cache folder to force a fresh one. Where no
cache folder can be made, ``npm ci`` runs in ``folder`` itself.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path


def cache_root() -> Path:
    explicit = os.environ.get("TREADLE_TEST_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "treadle-tests"


def _complete(modules: Path, needs: Sequence[str]) -> bool:
    return all((modules / need).exists() for need in needs)


def _npm_ci(npm: str, where: Path, timeout: float) -> str | None:
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund"],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        return f"could not install from the npm registry: {done.stderr[-800:]}"
    return None


def install(folder: Path, needs: Sequence[str], *, timeout: float = 900) -> str | None:
    """Make ``folder/node_modules`` complete (each of ``needs``, paths under it, exists);
    None when it is, else why it cannot be (the caller skips with that)."""
    here = folder / "node_modules"
    if _complete(here, needs):
        return None
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not on this machine (apt-get install npm)"
    pins = b"".join((folder / name).read_bytes() for name in ("package.json", "package-lock.json"))
    key = hashlib.sha256(pins + platform.machine().encode()).hexdigest()[:16]
    root = cache_root() / "npm"
    cached = root / f"{folder.name}-{key}"
    if not _complete(cached / "node_modules", needs):
        try:
            root.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=root))
        except OSError:  # no cache to write to: install in place, as npm ci would
            problem = _npm_ci(npm, folder, timeout)
            return problem or (None if _complete(here, needs) else f"{here} is incomplete")
        try:
            for name in ("package.json", "package-lock.json"):
                shutil.copy(folder / name, work / name)
            problem = _npm_ci(npm, work, timeout)
            if problem is not None:
                return problem
            if not _complete(cached / "node_modules", needs):  # else another run was first
                shutil.rmtree(cached, ignore_errors=True)
                os.rename(work, cached)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if here.is_symlink() or here.is_file():
        here.unlink()
    elif here.exists():  # an incomplete install of its own: npm ci would remove it too
        shutil.rmtree(here)
    try:
        here.symlink_to(cached / "node_modules", target_is_directory=True)
    except FileExistsError:  # linked by another process meanwhile
        pass
    return None if _complete(here, needs) else f"{here} is incomplete"

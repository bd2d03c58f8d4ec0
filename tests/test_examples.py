"""Every example runs to the end offline (no TREADLE_MODEL) and exits 0, copied alone into
an empty folder as a reader would copy it (no sibling helper module to import), and leaves
no temporary file behind.

Each runs as ``python example.py`` from the first line, in a process forked from the worker's
preloader (tests/preloaded.py, the ``server_preloader`` of tests/conftest.py): it has imported
treadle, treadle.testing, the providers, and the MCP SDK and the web stack some examples use
(about 0.5 s of CPU for each example otherwise, 1.5 s for one using MCP)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.preloaded import Preloader

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SCRIPTS = sorted(p for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))
# what an example runs beside itself, by design (not a helper it imports)
COMPANIONS = {"mcp_tools.py": ["_mcp_server.py"]}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_example_runs_offline(script: Path, tmp_path: Path, server_preloader: Preloader) -> None:
    for name in [script.name, *COMPANIONS.get(script.name, [])]:
        shutil.copy(EXAMPLES / name, tmp_path / name)
    temp = tmp_path / "tmp"  # its temporary files: none may be left behind
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TREADLE_MODEL"}
    env["TMPDIR"] = str(temp)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        env.pop(key, None)
    done = subprocess.run(
        server_preloader.command(script.name),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{script.name} failed:\n{done.stdout}\n{done.stderr}"
    assert "offline" in (done.stdout + done.stderr).lower(), "offline mode must be announced"
    left = sorted(p.name for p in temp.iterdir())
    assert not left, f"{script.name} left temporary files behind: {left}"

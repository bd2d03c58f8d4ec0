"""The built wheel, as a user gets it: its file list, and a fresh virtual environment with
nothing but the wheel installed (no source tree on the path) running the README's first
agent, ``treadle --version`` and, once each extra is installed, that extra's module.

Packages come from the package index (the pip cache makes it quick); the README's agent
talks to a wire fake from the installed ``treadle.testing``, so no model is called.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "treadle"
EXTRAS = {  # extra -> what to run once it is installed
    "mcp": "import treadle.mcp",
    "otel": "import treadle.otel",
    "dbos": "import treadle.durable",
    "web": "from treadle import Agent; from treadle.ui.vercel_ai import vercel_ai_app; "
    "vercel_ai_app(Agent('openai:m', api_key='k'))",
    "ag-ui": "from treadle import Agent; from treadle.ui.ag_ui import ag_ui_app; "
    "ag_ui_app(Agent('openai:m', api_key='k'))",
    "rich": "from treadle.cli.render import RichRenderer; import rich",
    "trio": 'import anyio, trio; anyio.run(anyio.sleep, 0, backend="trio")',
}
MISSING_BEFORE = {"treadle.mcp": "mcp", "treadle.otel": "otel", "treadle.durable": "dbos"}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("build") is None or importlib.util.find_spec("hatchling") is None,
        reason="build and hatchling are in the dev extra: pip install -e '.[dev]'",
    ),
]


def run(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{args}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", out, ROOT)
    (found,) = out.glob("treadle-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[Path]:
    """A fresh environment (no system site-packages) with only the wheel and its
    dependencies; yields its python. Commands run from an empty directory."""
    where = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", "--without-pip", where / "env")
    python = where / "env" / "bin" / "python"
    pip(python, wheel)
    yield python


def pip(python: Path, *requirements: str | Path) -> None:
    """Install into ``python``'s environment with this environment's pip (the new one has
    none: quicker to make, and the same cache)."""
    run(
        sys.executable,
        *("-m", "pip", "--python", python, "install", "-q", "--no-compile"),  # no .pyc: faster
        *requirements,
    )


def user_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TREADLE_"))}
    env["OPENAI_API_KEY"] = "sk-test-not-a-real-key"
    return env


def test_the_wheel_holds_the_package_and_nothing_else(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {n for n in names if not n.startswith("treadle-")}
    source = {
        str(p.relative_to(PACKAGE.parent))
        for p in PACKAGE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert "treadle/py.typed" in shipped  # type checkers read the annotations
    assert shipped == source  # every module and data file, and nothing from tests/, docs/...
    meta = {n.split("/", 1)[1] for n in names if n.startswith("treadle-")}
    assert {"METADATA", "WHEEL", "RECORD", "entry_points.txt"} <= meta
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA")))
    text = metadata.decode()
    for extra in EXTRAS:
        assert f"Provides-Extra: {extra}" in text
    assert "Requires-Python: >=3.10" in text


def test_the_readme_first_agent_runs_from_the_installed_wheel(venv: Path, tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## A first agent", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    (tmp_path / "first_agent.py").write_text(block.group(1))
    (tmp_path / "offline.py").write_text(
        textwrap.dedent(
            """
            import sys

            import httpx

            import treadle
            from treadle import AssistantMessage, ToolCall
            from treadle.testing import WireFake

            assert "site-packages" in treadle.__file__, treadle.__file__  # not a source tree
            call = ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})
            fake = WireFake.openai([AssistantMessage(content=[call]), "2 + 3 = 5."])
            original = httpx.AsyncClient.__init__

            def offline(self, *args, **kwargs):
                kwargs["transport"] = fake  # requests to api.openai.com go to the fake
                original(self, *args, **kwargs)

            httpx.AsyncClient.__init__ = offline
            code = open(sys.argv[1]).read()
            exec(compile(code, "README.md: A first agent", "exec"), {"__name__": "__main__"})
            fake.assert_done()
            print("tool result sent:", "5" in str(fake.requests[1].body))
            """
        )
    )
    out = run(venv, "-I", "offline.py", "first_agent.py", cwd=tmp_path, env=user_env())
    assert out.splitlines() == ["2 + 3 = 5. completed None", "tool result sent: True"]


def test_treadle_version_matches_the_package_metadata(venv: Path, tmp_path: Path) -> None:
    cli = venv.parent / "treadle"
    out = run(cli, "--version", cwd=tmp_path, env=user_env()).strip()
    version = run(
        venv,
        "-I",
        "-c",
        "import treadle, importlib.metadata as m; print(treadle.__version__, m.version('treadle'))",
        cwd=tmp_path,
        env=user_env(),
    ).split()
    assert version[0] == version[1] != "0+unknown"
    assert out == f"treadle {version[0]}"


def test_every_extra_imports_once_installed_and_says_which_before(
    venv: Path, wheel: Path, tmp_path: Path
) -> None:
    before = textwrap.dedent(
        f"""
        from treadle.errors import MissingExtra
        for module, extra in {MISSING_BEFORE!r}.items():
            try:
                __import__(module)
            except MissingExtra as exc:
                assert f"treadle[{{extra}}]" in str(exc), exc
            else:
                raise SystemExit(module + " imported without its extra")
        print("before: ok")
        """
    )
    assert run(venv, "-I", "-c", before, cwd=tmp_path, env=user_env()).strip() == "before: ok"
    pip(venv, f"treadle[{','.join(EXTRAS)}] @ {wheel.as_uri()}")
    for statement in EXTRAS.values():  # run() fails the test on any error, with its output
        run(venv, "-I", "-c", statement, cwd=tmp_path, env=user_env())

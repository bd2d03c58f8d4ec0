"""The public API cannot change by accident: the names each public module exports, with
their signatures, are compared with the reviewed snapshot in ``tests/api/public_api.txt``.

An intended change: run ``make api-snapshot`` (``python scripts/api_snapshot.py --update``)
and commit the new file with the change, so the review shows the API diff."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "api_snapshot", ROOT / "scripts" / "api_snapshot.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("api_snapshot", module)
    spec.loader.exec_module(module)
    return module


api = load_script()


def test_the_public_api_matches_the_reviewed_snapshot() -> None:
    committed = api.sections(api.SNAPSHOT.read_text(encoding="utf-8"))
    now = api.sections(api.snapshot())
    assert sorted(committed) == sorted(api.PUBLIC), "the snapshot's modules are the public ones"
    skipped = [m for m, text in now.items() if api.NOT_INSTALLED in text]
    changed = "".join(api.diff(committed[m], now[m]) for m in api.PUBLIC if m not in skipped)
    assert not changed, (
        "the public API changed. If that is intended, run `make api-snapshot` and commit "
        f"tests/api/public_api.txt with the change:\n{changed}"
    )
    if skipped:
        pytest.skip(f"not compared, their extras are missing: {skipped}")


def test_the_snapshot_shows_signatures_and_bases() -> None:
    text = api.SNAPSHOT.read_text(encoding="utf-8")
    assert "class AgentBusy(TreadleError, RuntimeError)" in text
    assert "async def agent_loop(prompts: str | AgentMessage" in text
    assert " at 0x" not in text  # no address from a repr: the same on every run


def test_a_changed_signature_is_reported_with_a_diff(monkeypatch: pytest.MonkeyPatch) -> None:
    import treadle

    def agent_loop(prompts: str, context: object) -> None: ...

    monkeypatch.setattr(treadle, "agent_loop", agent_loop)
    now = api.sections(api.snapshot())["treadle"]
    committed = api.sections(api.SNAPSHOT.read_text(encoding="utf-8"))["treadle"]
    changes = api.diff(committed, now)
    assert "-async def agent_loop(" in changes and "+def agent_loop(prompts: str" in changes


def test_no_package_exports_a_name_its_submodule_shadows() -> None:
    """A lazily exported name equal to a submodule's name is replaced by the module once
    anything imports that submodule (``from treadle.context import compact`` once returned
    the module ``treadle.context.compact``, depending on import order)."""
    import pkgutil

    import treadle

    clashes = []
    for info in pkgutil.walk_packages(treadle.__path__, "treadle."):
        if not info.ispkg:
            continue
        try:
            package = importlib.import_module(info.name)
        except ImportError:  # an extra that is not installed
            continue
        submodules = {sub.name for sub in pkgutil.iter_modules(package.__path__)}
        clashes += [f"{info.name}.{n}" for n in getattr(package, "__all__", ()) if n in submodules]
    assert not clashes, f"exported names that are also submodules: {clashes}"

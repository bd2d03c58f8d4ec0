from __future__ import annotations

import os
from pathlib import Path

import pytest

# The cl100k_base encoding ships with the tests, so token tests never need the network.
os.environ.setdefault(
    "TIKTOKEN_CACHE_DIR", str(Path(__file__).resolve().parent / "fixtures" / "tiktoken")
)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every async test runs on both asyncio and trio (unless marked ``one_backend``)."""
    return str(request.param)


_WIDTH = {"session": 0, "package": 1, "module": 2}


def _shared_fixture(item: pytest.Item) -> str | None:
    """The widest-scoped fixture of this suite (a server, a DBOS launch, a PostgreSQL
    cluster) the test uses, as ``where::name``; None when it uses none."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    shared = [
        (_WIDTH[d.scope], f"{d.baseid}::{name}")
        for name, defs in info.name2fixturedefs.items()
        for d in defs
        if d.scope in _WIDTH and d.baseid  # the suite's own, not a plugin's
    ]
    return min(shared)[1] if shared else None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked ``one_backend`` (its backend cannot matter: pure parsing, encoding,
    formatting) runs on asyncio only; the loop, cancellation, streams and I/O keep both.

    Under ``pytest -n N --dist loadgroup`` (``make test``), the tests that share an
    expensive fixture run on one worker, so it starts once, not once per worker."""
    kept, dropped = [], []
    for item in items:
        shared = _shared_fixture(item)
        if shared is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(shared))
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("anyio_backend") if callspec is not None else None
        if backend == "trio" and item.get_closest_marker("one_backend") is not None:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept

"""What every test shares: both anyio backends, the tiktoken files, and how ``make test``
(``pytest -n auto --dist loadgroup``) spreads the suite over its workers.

Grouping and order live in tests/scheduling.py: tests that share an instance of a module-
(or class-, package-) scoped fixture of this suite run as one unit on one worker, so the
fixture is made once; session-scoped fixtures are made once per worker and group nothing;
units holding a test marked ``slow`` are handed out first, larger before smaller, then the
rest, larger units first. pytest-xdist's own ``loadgroup`` is replaced because pytest 9.2
ignores the node-id suffix it groups by (pytest-dev/pytest-xdist#1386).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests import scheduling, suite_preloader
from tests.preloaded import Preloader, preloading

# ``pytest -n N --dist loadgroup`` (``make test``): which tests run together on one worker,
# and in which order (tests/scheduling.py says how).
from tests.scheduling import (  # noqa: F401
    in_suite_order,
    pytest_collection_finish,
    pytest_configure_node,
    pytest_xdist_auto_num_workers,
    pytest_xdist_make_scheduler,
)


def pytest_configure(config: pytest.Config) -> None:
    scheduling.pytest_configure(config)
    # the xdist workers, and the processes the tests start, forked from one preloader
    suite_preloader.start(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    suite_preloader.stop(config)
    scheduling.pytest_unconfigure(config)


# The cl100k_base encoding ships with the tests, so token tests never need the network.
os.environ.setdefault(
    "TIKTOKEN_CACHE_DIR", str(Path(__file__).resolve().parent / "fixtures" / "tiktoken")
)


@pytest.fixture(scope="session")
def server_preloader() -> Iterator[Preloader]:
    """The worker's preloader of ``SERVER_MODULES`` (tests/suite_preloader.py; the run's in
    an xdist worker, else started when first used): the MCP test server, ``treadle ui``,
    ``treadle serve`` and the example apps the tests start are forked from it."""
    yield from preloading(*suite_preloader.SERVER_MODULES)


@pytest.fixture(scope="session")
def chromium() -> Iterator[str]:
    """One headless chromium per worker (started when first used; its DevTools HTTP
    endpoint) for every page test: each test opens a tab of its own (about 0.6 s of CPU
    for each chromium started and stopped)."""
    from tests.browser import CHROMIUM, launch_chromium

    if CHROMIUM is None:
        pytest.skip("chromium is not installed (scripts/install-system-deps.sh installs it)")
    with launch_chromium() as endpoint:
        yield endpoint


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every async test runs on both asyncio and trio (unless marked ``one_backend``)."""
    return str(request.param)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked ``one_backend`` (its backend cannot matter: pure parsing, encoding,
    formatting) runs on asyncio only; the loop, cancellation, streams and I/O keep both.
    (First, on an xdist worker, the tests are put back in the suite's order.)"""
    in_suite_order(config, items)
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("anyio_backend") if callspec is not None else None
        if backend == "trio" and item.get_closest_marker("one_backend") is not None:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept

"""One preloader for a whole ``pytest -n N`` run (tests/preloaded.py): the xdist workers and
the processes the tests start are forked from it.

Each worker used to import pytest, its plugins, treadle and the SDKs the test modules import
(about 6 s of CPU of its ~11 s collection), and then start preloaders of its own for the
server processes and the durable tests' processes (about 2 s of imports each). Here the
controller starts one preloader of all of it before the workers, each worker is launched
from it (``popen//python=`` a launch: ``python -u -c BOOTSTRAP`` as execnet runs it, forked
where everything is imported), and the tests' ``server_preloader`` and durable ``preloader``
fixtures use it too (``TREADLE_TEST_PRELOADER``, the socket, reaches them in the workers'
environment). Without xdist (``-n 0``), for paths given on the command line, or where fork
is missing, nothing changes: each fixture starts a preloader of its own.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

import pytest
from tests.preloaded import SHARED, Preloader

# What the suite's server processes import that takes long: the MCP test server and the MCP
# conformance client (the MCP SDK: about 1.5 s of CPU), ``treadle ui`` and ``treadle serve``
# (the CLI, starlette, uvicorn) and the web examples (about 0.8 s each). Forked from a
# process that has imported them, each starts in about 0.1 s. (A module not installed is not
# preloaded: a process that needs it fails as it would on its own.)
SERVER_MODULES = (
    *("mcp.server.mcpserver", "mcp.client.auth", "treadle.mcp", "httpx2", "pydantic"),
    *("treadle.cli", "treadle.cli.ui", "treadle.cli.serve", "treadle.cli.demo"),
    *("treadle.cli.setup", "treadle.ui.web", "treadle.ui.agent_server", "treadle.ui.mcp_server"),
    *("treadle.ui.ag_ui", "treadle.ui.vercel_ai", "uvicorn", "httpx", "anyio._backends._asyncio"),
    *("treadle.providers", "treadle.sessions", "treadle.testing"),
)


# pytest, its plugins and what the test modules import at collection (the test modules
# themselves are imported by each worker: their asserts are rewritten there)
WORKER_MODULES = (
    *("pytest", "_pytest.main", "_pytest.python", "_pytest.fixtures", "_pytest.terminal"),
    *("xdist.remote", "xdist.plugin", "execnet", "_hypothesis_pytestplugin", "anyio.pytest_plugin"),
    *("hypothesis", "hypothesis.strategies", "respx", "anyio._backends._trio", "trio"),
    *("treadle.agent", "treadle.context", "treadle.tools", "treadle.loop", "treadle.simulation"),
    *("treadle.evals", "treadle.ext", "treadle.otel", "treadle.a2a", "treadle.durable"),
    *("openai", "a2a.client", "opentelemetry.sdk.trace", "opentelemetry.sdk.metrics"),
    *("ag_ui.core", "botocore.session", "google.auth", "jupyter_client", "yaml", "tiktoken"),
)


def suite_modules() -> tuple[str, ...]:
    """What the run's preloader imports: :data:`WORKER_MODULES`, and what the server
    processes and the durable tests' processes import (their fixtures use it)."""
    from tests.durable.processes import PRELOADED

    return tuple(dict.fromkeys((*WORKER_MODULES, *SERVER_MODULES, *PRELOADED)))


def start(config: pytest.Config) -> None:
    """(controller) With xdist workers to start on the whole suite (no paths given, as
    ``make test`` runs it): start the run's preloader and launch each worker from it. (For a
    few modules its own start, ~5 s of CPU, would cost more than it saves.)"""
    specs: list[str] = list(config.getoption("tx", None) or [])
    whole = config.args_source is pytest.Config.ArgsSource.TESTPATHS
    if hasattr(config, "workerinput") or not specs or not whole or not Preloader.available():
        return
    if any(spec != "popen" for spec in specs):  # (given --tx: left as given)
        return
    preloader = Preloader(*suite_modules())
    socket = preloader.socket()
    config.stash[_RUN] = preloader
    os.environ[SHARED] = socket  # the workers' launches carry it to the workers
    python = shlex.join(preloader.command_prefix())
    config.option.tx = [f"popen//python={python}" for _ in specs]


def stop(config: pytest.Config) -> None:
    preloader = config.stash.get(_RUN, None)
    if preloader is not None:
        os.environ.pop(SHARED, None)
        preloader.close()


_RUN = pytest.StashKey[Any]()

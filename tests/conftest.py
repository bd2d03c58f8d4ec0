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
    """Every async test runs on both asyncio and trio."""
    return str(request.param)

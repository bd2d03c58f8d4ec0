from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED / "fixtures" / "tiktoken"))


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every async test runs on both asyncio and trio."""
    return str(request.param)

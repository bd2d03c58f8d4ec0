"""One A2A server per test worker, in a process of its own (tests/a2a/sut.py under
uvicorn on 127.0.0.1), driven by the official a2a-sdk client from the tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("a2a")

from a2a.client import Client, ClientConfig, create_client
from tests.a2a.a2a_helpers import TOKEN, auth
from tests.preloaded import Preloader
from tests.servers import example_server

SUT = Path(__file__).with_name("sut.py")


@pytest.fixture(scope="session")
def a2a_url(server_preloader: Preloader) -> Iterator[str]:
    """The served agent's base URL (its token: :data:`TOKEN`)."""
    env = {"A2A_TEST_TOKEN": TOKEN}
    with example_server(
        SUT, preloader=server_preloader, env=env, probe="/.well-known/agent-card.json"
    ) as url:
        yield url


@pytest.fixture
async def a2a_client(a2a_url: str) -> AsyncIterator[Client]:
    """The official a2a-sdk client, streaming, with the server's token."""
    async with httpx.AsyncClient(headers=auth(), timeout=30) as http:
        client = await create_client(a2a_url, ClientConfig(streaming=True, httpx_client=http))
        yield client

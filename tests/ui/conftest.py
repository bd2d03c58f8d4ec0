"""The UI example app (examples/ui/app.py) served by uvicorn on 127.0.0.1 for the tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.preloaded import Preloader
from tests.servers import example_server

pytest.importorskip("starlette", reason="the web extra is not installed: pip install -e '.[web]'")
pytest.importorskip("uvicorn", reason="the web extra is not installed: pip install -e '.[web]'")

APP = Path(__file__).resolve().parents[2] / "examples" / "ui" / "app.py"


@pytest.fixture(scope="session")
def ui_server(server_preloader: Preloader) -> Iterator[str]:
    env = {"UI_EXAMPLE_DELAY": "0.005"}
    with example_server(APP, preloader=server_preloader, env=env, probe="/agui/runs/none") as url:
        yield url


def sse_frames(response: httpx.Response) -> Iterator[tuple[str | None, str]]:
    """(id, data) of each SSE frame of a streaming response."""
    frame_id: str | None = None
    data: list[str] = []
    for line in response.iter_lines():
        if line.startswith("id: "):
            frame_id = line[4:]
        elif line.startswith("data: "):
            data.append(line[6:])
        elif line == "" and data:
            yield frame_id, "\n".join(data)
            frame_id, data = None, []

"""The web example's page in a real headless chromium (driven over the DevTools protocol):
it shows the streamed answer and the tool call, and when the server drops the connection
mid-answer the browser's EventSource resumes with Last-Event-ID — every event exactly once."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette", reason="the web extra is not installed: pip install -e '.[web]'")
websockets_sync = pytest.importorskip(
    "websockets.sync.client", reason="websockets is not installed"
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (scripts/install-system-deps.sh installs it)",
)
APP = Path(__file__).resolve().parents[2] / "examples" / "web" / "app.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def app_url() -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "WEB_EXAMPLE_DELAY": "0.01", "WEB_EXAMPLE_DROP_AFTER": "15"}
    env.pop("TREADLE_MODEL", None)
    process = subprocess.Popen(
        [sys.executable, str(APP), str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(url + "/", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(up, 20, "the web example to start")
        yield url
    finally:
        process.terminate()
        process.wait(10)


class Page:
    """One chromium tab, driven over the DevTools protocol."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=30))
            if message.get("id") == self.next_id:
                return dict(message.get("result", {}))

    def eval(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")


@pytest.fixture
def browser() -> Iterator[str]:
    profile = tempfile.mkdtemp()
    assert CHROMIUM is not None
    process = subprocess.Popen(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    port_file = Path(profile) / "DevToolsActivePort"
    try:
        wait_until(port_file.exists, 30, "chromium to start")
        port = port_file.read_text().split()[0]
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(profile, ignore_errors=True)


def test_the_page_streams_the_answer_and_resumes_after_a_drop(app_url: str, browser: str) -> None:
    target = httpx.put(f"{browser}/json/new?{app_url}/", timeout=10).json()
    with websockets_sync.connect(target["webSocketDebuggerUrl"], max_size=None) as ws:
        check_page(Page(ws))


def check_page(page: Page) -> None:
    # (the tab starts on about:blank, which is "complete" too: wait for the app's page)
    loaded = "document.readyState === 'complete' && document.querySelector('button') !== null"
    wait_until(lambda: page.eval(loaded), 60, "the page to load")
    assert page.eval("document.querySelector('button').click(), true")
    try:
        status = wait_until(
            lambda: page.eval("document.getElementById('status').textContent"), 90, "the run"
        )
    except AssertionError:
        state = page.eval("JSON.stringify([window.seen, document.body.innerText])")
        raise AssertionError(f"the run did not end in the page: {state}") from None
    assert status == "completed"
    seen = page.eval("JSON.stringify(window.seen)")
    answer = page.eval("document.getElementById('answer').textContent")
    tools = page.eval("document.getElementById('tools').textContent")
    seqs = json.loads(seen)
    assert len(seqs) > 15  # more than the first connection carried: it resumed
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # no gap, no duplicate
    assert answer.startswith("It is sunny and 21 °C in Porto today")
    assert answer.endswith("a fine day for a walk by the river. ")
    assert "weather" in tools and "Sunny and 21" in tools

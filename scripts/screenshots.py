"""Screenshots of ``treadle ui`` for docs/web.md, light and dark, into docs/images/.

    python scripts/screenshots.py            # needs chromium and the web extra

Serves the offline demo (``treadle ui``, no model configured) on 127.0.0.1, asks it the
two-tool question in headless chromium, selects the model request in the inspector, and
saves ``web-light.png`` and ``web-dark.png``. Offline and repeatable: the page shows what it
looks like today.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images"
QUESTION = "What is 17 + 25, and what is the weather in Lisbon?"


def wait(check: Any, what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


class Tab:
    def __init__(self, ws: Any) -> None:
        self.ws, self.n = ws, 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == self.n:
                return dict(message.get("result", {}))

    def js(self, expression: str) -> Any:
        found = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return found.get("result", {}).get("value")

    def shoot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KB)")


@contextmanager
def serve_demo() -> Iterator[str]:
    """``treadle ui`` (the offline demo) on a free loopback port; yields its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "TREADLE_MODEL"}
    server = subprocess.Popen(
        [sys.executable, "-m", "treadle", "ui", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        wait(lambda: _answers(url + "api/info"), "treadle ui to start")
        yield url
    finally:
        server.terminate()
        server.wait(10)


@contextmanager
def chromium_tab(chromium: str) -> Iterator[tuple[Tab, str]]:
    """A headless chromium and one tab on it; yields the tab and the DevTools endpoint."""
    profile = tempfile.mkdtemp()
    browser = subprocess.Popen(
        [
            chromium,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        wait(lambda: port_file.exists() and port_file.read_text().split(), "chromium to start")
        devtools = f"http://127.0.0.1:{port_file.read_text().split()[0]}"
        target = httpx.put(f"{devtools}/json/new?about:blank", timeout=10).json()
        with connect(target["webSocketDebuggerUrl"], max_size=None) as ws:
            yield Tab(ws), devtools
    finally:
        browser.terminate()
        browser.wait(10)
        shutil.rmtree(profile, ignore_errors=True)


def find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def ask(tab: Tab, text: str) -> None:
    tab.js(
        "document.querySelector('[data-testid=message-input]').value = "
        f"{json.dumps(text)}; document.querySelector('[data-testid=send]').click()"
    )
    wait(lambda: tab.js("document.body.classList.contains('running')"), "the run")
    wait(lambda: not tab.js("document.body.classList.contains('running')"), "the answer")


def main() -> int:
    chromium = find_chromium()
    if chromium is None:
        print("chromium is not installed (scripts/install-system-deps.sh)", file=sys.stderr)
        return 2
    with serve_demo() as url, chromium_tab(chromium) as (tab, _):
        tab.call(
            "Emulation.setDeviceMetricsOverride",
            width=1360,
            height=820,
            deviceScaleFactor=1,
            mobile=False,
        )
        tab.call("Page.navigate", url=url)
        wait(lambda: tab.js("document.body?.dataset.ready === 'true'"), "the page")
        ask(tab, QUESTION)
        ask(tab, "Tell me about yourself")
        time.sleep(0.3)
        tab.js("document.querySelectorAll('[data-kind=model]')[0].click()")
        tab.js("document.querySelector('[data-testid=message-input]').blur()")
        for scheme in ("light", "dark"):
            tab.call(
                "Emulation.setEmulatedMedia",
                features=[{"name": "prefers-color-scheme", "value": scheme}],
            )
            time.sleep(0.3)
            tab.shoot(OUT / f"web-{scheme}.png")
    return 0


def _answers(url: str) -> bool:
    try:
        httpx.get(url, timeout=1)
        return True
    except httpx.TransportError:
        return False


if __name__ == "__main__":
    sys.exit(main())

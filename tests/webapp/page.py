"""Driving the web app's page in chromium through its ``data-testid`` elements."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from tests.browser import Page, wait_until

websockets_sync = pytest.importorskip(
    "websockets.sync.client", reason="websockets is not installed"
)


class WebPage(Page):
    def js(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def ready(self) -> None:
        wait_until(lambda: self.js("document.body?.dataset.ready === 'true'"), 30, "the page")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        wait_until(lambda: self.js("location.href") != "about:blank", 30, f"navigating to {url}")
        self.ready()

    def reload(self) -> None:
        self.js("document.body.dataset.ready = 'false'")
        self.call("Page.reload")
        self.ready()

    def size(self, width: int, height: int) -> None:
        """The window's size, as a user's window (or phone) would have it."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def status(self) -> str:
        return str(self.js("document.getElementById('status').textContent"))

    def click(self, testid: str, index: int = -1) -> None:
        self.js(f"[...document.querySelectorAll('[data-testid={testid}]')].at({index}).click()")

    def type(self, text: str) -> None:
        """Into the message box, as the browser's input does."""
        self.js("document.querySelector('[data-testid=message-input]').focus()")
        self.call("Input.insertText", text=text)

    def key(self, key: str, code: str, keycode: int, modifiers: int = 0) -> None:
        for kind in ("keyDown", "keyUp"):
            self.call(
                "Input.dispatchKeyEvent",
                type=kind,
                key=key,
                code=code,
                windowsVirtualKeyCode=keycode,
                modifiers=modifiers,
                **({"text": "\r"} if key == "Enter" and kind == "keyDown" else {}),
            )

    def send(self, text: str) -> None:
        self.js(
            "(() => { const i = document.querySelector('[data-testid=message-input]');"
            f" i.value = {json.dumps(text)}; }})()"
        )
        self.click("send")

    def messages(self) -> list[dict[str, Any]]:
        return list(
            self.js(
                "[...document.querySelectorAll('[data-testid=message]')].map((m) => ({"
                " role: m.dataset.role, text: m.querySelector('.body').innerText,"
                " stopped: m.dataset.stopped === 'true' }))"
            )
        )

    def last_text(self, role: str = "assistant") -> str:
        found = [m["text"] for m in self.messages() if m["role"] == role]
        return found[-1] if found else ""

    def tools(self) -> list[dict[str, str]]:
        return list(
            self.js(
                "[...document.querySelectorAll('[data-testid=tool-call]')].map((t) => ({"
                " tool: t.dataset.tool, state: t.dataset.state, text: t.innerText }))"
            )
        )

    def running(self) -> bool:
        return bool(self.js("document.body.classList.contains('running')"))

    def idle(self) -> None:
        self.wait(lambda: not self.running(), "the run's end")

    def wait(self, check: Any, what: str, timeout: float = 30) -> Any:
        try:
            return wait_until(check, timeout, what)
        except AssertionError as exc:  # say what the page showed
            raise AssertionError(f"{exc}; the page shows {self.messages()}") from None


@contextmanager
def open_tab(browser: str, url: str) -> Iterator[WebPage]:
    target = httpx.put(f"{browser}/json/new?about:blank", timeout=10).json()
    try:
        with websockets_sync.connect(target["webSocketDebuggerUrl"], max_size=None) as ws:
            page = WebPage(ws)
            page.goto(url)
            yield page
    finally:
        httpx.get(f"{browser}/json/close/{target['id']}", timeout=10)

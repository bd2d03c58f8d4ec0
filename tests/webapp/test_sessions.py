"""Sessions in the web app: a conversation stored by another process (a SQLite store) is
listed, reopened, continued and branched from the page; an approval still waiting survives a
reload."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.browser import needs_chromium
from tests.preloaded import Preloader

from treadle import Agent
from treadle.sessions import SqliteStore
from treadle.testing import ScriptedProvider

from .conftest import serve_ui
from .page import WebPage, open_tab

pytestmark = needs_chromium
# no test here acts while an answer streams: the model answers at a quick pace (conftest.py)
STREAM_DELAY = "0.005"


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("store") / "sessions.db"
    store = SqliteStore(path)
    agent = Agent(ScriptedProvider(["The lighthouse is red."]), store=store)
    agent.run_sync("remember the lighthouse")
    agent.close()
    store.close()
    return path


@pytest.fixture(scope="module")
def store_server(stored: Path, server_preloader: Preloader) -> Iterator[str]:
    env = {"WEB_TEST_STORE": str(stored), "WEB_TEST_DELAY": STREAM_DELAY}
    with serve_ui("tests.webapp.scripted_agent:agent", preloader=server_preloader, env=env) as url:
        yield url


def sessions(page: WebPage) -> list[dict[str, str]]:
    return list(
        page.js(
            "[...document.querySelectorAll('[data-testid=session-list] button.session')]"
            ".map(b => ({id: b.dataset.id, text: b.innerText}))"
        )
    )


def test_a_stored_session_is_reopened_continued_and_branched(
    store_server: str, chromium: str
) -> None:
    with open_tab(chromium, store_server + "/") as page:
        (listed,) = sessions(page)
        assert "remember the lighthouse" in listed["text"] and "2 msgs" in listed["text"]
        page.js(f"document.querySelector('button.session[data-id=\"{listed['id']}\"]').click()")
        page.wait(lambda: len(page.messages()) == 2, "the stored history")
        assert [(m["role"], m["text"].strip()) for m in page.messages()] == [
            ("user", "remember the lighthouse"),
            ("assistant", "The lighthouse is red."),
        ]
        assert page.js("location.hash") == f"#s={listed['id']}"

        page.send("short follow up")
        page.wait(lambda: page.last_text() == "Short answer to: short follow up", "the answer")
        page.idle()
        page.wait(lambda: "4 msgs" in sessions(page)[0]["text"], "the list to update")

        # branch after the first answer: a new session holding the first two messages
        page.wait(lambda: page.js("document.querySelectorAll('.branch').length") == 4, "branch")
        page.js(
            "document.querySelectorAll('[data-testid=message]')[1].querySelector('.branch').click()"
        )
        page.wait(lambda: page.js("location.hash") != f"#s={listed['id']}", "the branch")
        page.wait(lambda: len(page.messages()) == 2, "the branch's history")
        page.send("short in the branch")
        page.wait(lambda: page.last_text() == "Short answer to: short in the branch", "answer")
        page.idle()
        page.wait(lambda: len(sessions(page)) == 2, "two sessions listed")

        # the original is unchanged
        page.js(f"document.querySelector('button.session[data-id=\"{listed['id']}\"]').click()")
        page.wait(lambda: page.js("location.hash") == f"#s={listed['id']}", "the original")
        page.wait(lambda: page.last_text() == "Short answer to: short follow up", "its history")
        assert len(page.messages()) == 4


def test_an_approval_still_waits_after_a_reload(store_server: str, chromium: str) -> None:
    with open_tab(chromium, store_server + "/") as page:
        page.send("delete my notes")
        page.wait(
            lambda: page.js("document.querySelector('[data-testid=approve]') !== null"), "ask"
        )
        page.idle()
        page.reload()
        page.wait(
            lambda: page.js("document.querySelector('[data-testid=approve]') !== null"), "ask"
        )
        assert page.tools()[-1]["state"] == "approval-requested"
        page.click("approve")
        page.wait(
            lambda: page.last_text().endswith("Done: Deleted notes.txt."), "the approved call"
        )
        assert page.tools()[-1]["state"] == "output-available"


def test_the_token_url_opens_a_working_page(chromium: str, server_preloader: Preloader) -> None:
    token = ("--token", "browser-token-123")
    env = {"WEB_TEST_DELAY": STREAM_DELAY}
    agent = "tests.webapp.scripted_agent:agent"
    with serve_ui(agent, *token, preloader=server_preloader, env=env) as url:
        with open_tab(chromium, url + "/?token=browser-token-123") as page:
            assert page.js("location.href") == url + "/"  # the token left the address
            assert "token" not in page.js("document.cookie")  # HttpOnly: not readable
            page.send("short hello")
            page.wait(lambda: page.last_text() == "Short answer to: short hello", "the answer")
            page.idle()
            model = "document.querySelector('[data-kind=model]') !== null"
            page.wait(lambda: page.js(model), "the inspector's events")

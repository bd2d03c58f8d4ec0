"""``treadle ui``: its help, the offline demo served and answering on a port, an agent
module found in the current directory, a token asked for when one is set. Each command is
``python -m treadle ui ...``, forked from the worker's preloader (tests/conftest.py)."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from tests.preloaded import Preloader

from treadle.cli.ui import choose_token, is_loopback

from .conftest import serve_ui

TreadleUI = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def treadle_ui(server_preloader: Preloader) -> TreadleUI:
    """``treadle_ui(*args, cwd=None)``: ``python -m treadle ui ARGS`` run to its end."""

    def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            server_preloader.command("-m", "treadle", "ui", *args),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=60,
        )

    return run


def test_help_says_how_to_use_it(treadle_ui: TreadleUI) -> None:
    done = treadle_ui("--help")
    assert done.returncode == 0
    words = ("module:agent", "--host", "--port", "--token", "127.0.0.1", "TREADLE_MODEL")
    for word in (*words, "--origin", "--trusted-host", "--request-timeout"):
        assert word in done.stdout


def chat(url: str, text: str, chat_id: str = "c1") -> list[dict[str, object]]:
    body = {
        "id": chat_id,
        "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": text}]}],
    }
    with httpx.stream(
        "POST", url + "/api/chat", json=body, headers={"origin": url}, timeout=30
    ) as r:
        assert r.status_code == 200, r.read()
        lines = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    return [json.loads(x) for x in lines if x != "[DONE]"]


def test_treadle_ui_alone_serves_the_offline_demo_with_its_tools(
    server_preloader: Preloader,
) -> None:
    with serve_ui(preloader=server_preloader) as url:
        info = httpx.get(url + "/api/info").json()
        assert info["model"] == "offline:offline-demo"
        page = httpx.get(url + "/")
        assert page.status_code == 200 and 'data-testid="message-input"' in page.text
        chunks = chat(url, "What is 17 + 25, and what is the weather in Lisbon?")
        outputs = [c["output"] for c in chunks if c["type"] == "tool-output-available"]
        assert sorted(outputs) == ["42.0", "Lisbon: 21 °C, clear sky"]
        text = "".join(str(c["delta"]) for c in chunks if c["type"] == "text-delta")
        assert "(offline model) The tools returned" in text


def test_an_agent_module_is_found_in_the_current_directory(
    tmp_path: Path, treadle_ui: TreadleUI, server_preloader: Preloader
) -> None:
    folder = tmp_path
    (folder / "myagent.py").write_text(
        "from treadle import Agent\n"
        "from treadle.testing import ScriptedProvider\n"
        "def make():\n"
        "    return Agent(ScriptedProvider(['from my module'] * 3), name='mine')\n"
    )
    missing = treadle_ui("myagent:nothing", "--port", "1", cwd=folder)
    assert missing.returncode != 0 and "myagent:nothing" in missing.stderr
    with serve_ui("myagent:make", preloader=server_preloader, cwd=folder) as url:
        assert httpx.get(url + "/api/info").json()["title"] == "mine"
        text = "".join(str(c.get("delta", "")) for c in chat(url, "hi"))
        assert text == "from my module"


def test_a_token_set_on_the_command_line_is_asked_for(server_preloader: Preloader) -> None:
    token = ("--token", "tok-from-cli-123")
    with serve_ui("tests.webapp.scripted_agent:agent", *token, preloader=server_preloader) as url:
        assert httpx.get(url + "/").status_code == 401
        headers = {"authorization": "Bearer tok-from-cli-123"}
        assert httpx.get(url + "/api/info", headers=headers).status_code == 200


def test_a_token_is_made_when_the_address_is_not_loopback() -> None:
    assert choose_token("127.0.0.1", None) is None
    assert choose_token("localhost", None) is None
    assert choose_token("::1", None) is None
    assert choose_token("127.0.0.1", "given") == "given"
    made = choose_token("0.0.0.0", None)
    assert made is not None and len(made) >= 24
    assert choose_token("192.168.1.5", None) != made
    assert not is_loopback("0.0.0.0") and not is_loopback("example.com")


def test_a_busy_port_is_one_line_saying_how_to_choose_another(treadle_ui: TreadleUI) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = treadle_ui("--port", str(port))
    assert done.returncode == 2
    assert "http://" not in done.stdout  # no address printed for a server that never ran
    lines = done.stderr.strip().splitlines()
    assert lines == [lines[0]] and "Traceback" not in done.stderr, done.stderr
    assert f"port {port}" in lines[0] and "in use" in lines[0] and "--port" in lines[0]


def test_a_tool_given_for_the_agent_is_one_clear_line(
    tmp_path: Path, treadle_ui: TreadleUI
) -> None:
    (tmp_path / "mytools.py").write_text(
        "from treadle import tool\n"
        "@tool\n"
        "def weather(city: str) -> str:\n"
        "    '''The weather.'''\n"
        "    return 'sunny'\n"
        "def needs_args(model):\n"
        "    raise AssertionError('never called like this')\n"
    )
    done = treadle_ui("mytools:weather", "--port", "1", cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "weather is a tool, not an agent" in done.stderr
    assert "Agent(model, tools=[weather])" in done.stderr
    factory = treadle_ui("mytools:needs_args", "--port", "1", cwd=tmp_path)
    assert factory.returncode != 0 and "Traceback" not in factory.stderr, factory.stderr
    assert "calling needs_args() to make the agent failed" in factory.stderr


def test_a_lan_host_is_told_how_to_serve_with_a_token(server_preloader: Preloader) -> None:
    with serve_ui("tests.webapp.scripted_agent:agent", preloader=server_preloader) as url:
        refused = httpx.get(url + "/", headers={"host": "192.168.1.20:8000"})
    assert refused.status_code == 403
    assert "--host 0.0.0.0" in refused.text and "token" in refused.text

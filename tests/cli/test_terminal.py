"""The CLI in a real terminal: tmux runs it, keys are sent as a person types them, and the
screen is read back. Arrow keys, history, Ctrl-C at the prompt and mid-answer, Ctrl-D."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None,
    reason="tmux is not installed (scripts/install-system-deps.sh installs it)",
)


PROMPT = "you> "


class Terminal:
    """A tmux session running bash, 120x40, on its own server socket."""

    def __init__(self, home: Path) -> None:
        self.socket = f"treadle-test-{uuid.uuid4().hex[:8]}"
        self.home = home
        self._tmux("new-session", "-d", "-x", "120", "-y", "40", "bash --norc --noprofile")
        self.type("export PS1='$ '", enter=True)
        self.type("clear", enter=True)

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10
        )
        return done.stdout

    def type(self, text: str, *, enter: bool = False, prompt: str | None = None) -> None:
        """Type ``text``; at a line editor's ``prompt``, as a person would: once it shows.
        Keys sent in the instant before the line editor reads the terminal are discarded
        when it sets the terminal up (a flush a person never types into); type again then."""
        for _ in range(3 if prompt else 1):
            self._tmux("send-keys", "-l", text)
            if prompt is None:  # a shell: it echoes what it reads, whenever it reads it
                break
            try:
                self.wait_for(rf"{re.escape(prompt)}{re.escape(text)} *$", timeout=3.0)
                break
            except AssertionError:
                continue
        if enter:
            self.keys("Enter")

    def keys(self, *names: str) -> None:
        self._tmux("send-keys", *names)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-J")

    def wait_for(self, pattern: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if re.search(pattern, text, re.M):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} never appeared; the screen:\n{text}")
            time.sleep(0.1)

    def run(self, command: str, env: dict[str, str]) -> None:
        assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        self.type(f"{assignments} {command}; echo EXIT=$?", enter=True)

    def close(self) -> None:
        self._tmux("kill-server")


@pytest.fixture
def term(tmp_path: Path) -> Iterator[Terminal]:
    terminal = Terminal(tmp_path)
    try:
        yield terminal
    finally:
        terminal.close()


def treadle(*args: str) -> str:
    return " ".join([shlex.quote(sys.executable), "-m", "treadle", *map(shlex.quote, args)])


def env_for(tmp_path: Path, delay: float = 0.005) -> dict[str, str]:
    env = {
        "TREADLE_HISTORY_FILE": str(tmp_path / "history"),
        "TREADLE_SESSIONS": str(tmp_path / "sessions.db"),
        "TREADLE_OFFLINE_DELAY": str(delay),
        "HOME": str(tmp_path),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    return env


def test_chat_answers_recalls_history_and_quits_on_ctrl_d(term: Terminal, tmp_path: Path) -> None:
    term.run(treadle("chat", "--model", "offline"), env_for(tmp_path))
    term.wait_for(r"^you> ")
    term.type("first question", enter=True, prompt=PROMPT)
    term.wait_for(r"You said: 'first question'")
    term.wait_for(r"tokens in \d+ out \d+\s*\n+you> $")
    term.keys("Up")  # readline recalls the previous prompt
    term.wait_for(r"^you> first question$")
    term.keys("C-u")  # and edits it
    term.type("/nosuch", enter=True, prompt=PROMPT)
    term.wait_for(r"unknown command /nosuch; the commands are: /model")
    term.keys("C-d")
    screen = term.wait_for(r"^EXIT=\d+")
    assert "EXIT=0" in screen and "Traceback" not in screen
    assert (tmp_path / "history").read_text().splitlines()[-1] == "/nosuch"


def test_ctrl_c_mid_answer_aborts_and_returns_to_the_prompt(term: Terminal, tmp_path: Path) -> None:
    term.run(treadle("chat", "--model", "offline"), env_for(tmp_path, delay=1.0))
    term.wait_for(r"^you> ")
    term.type("tell me a long story", enter=True, prompt=PROMPT)
    term.wait_for(r"You said")  # the answer is streaming
    term.keys("C-c")
    screen = term.wait_for(r"\(interrupted\)[\s\S]*you> $")
    assert "I am not a real model" not in screen  # it was cut off mid-answer
    assert "[run ended: cancelled]" in screen and "Traceback" not in screen
    term.type("still here?", enter=True, prompt=PROMPT)  # the conversation goes on
    term.wait_for(r"You said: 'still here\?'", timeout=30)


def test_ctrl_c_at_the_prompt_clears_then_quits(term: Terminal, tmp_path: Path) -> None:
    term.run(treadle("chat", "--model", "offline", "--no-store"), env_for(tmp_path))
    term.wait_for(r"^you> ")
    term.type("half a thought", prompt=PROMPT)
    term.keys("C-c")  # clears the line, no warning
    term.wait_for(r"^you> half a thought\^C\n+you> $")
    term.keys("C-c")  # on an empty line: says how to quit
    term.wait_for(r"Ctrl-C again or Ctrl-D to quit")
    term.keys("C-c")
    screen = term.wait_for(r"^EXIT=\d+")
    assert "EXIT=0" in screen and "Traceback" not in screen


def test_run_interrupted_exits_130_with_one_line(term: Terminal, tmp_path: Path) -> None:
    term.run(treadle("run", "--model", "offline", "a story"), env_for(tmp_path, delay=1.0))
    term.wait_for(r"You said")
    term.keys("C-c")
    screen = term.wait_for(r"^EXIT=\d+")
    assert "EXIT=130" in screen
    assert "treadle: interrupted" in screen and "Traceback" not in screen


def test_resume_shows_the_last_exchange(term: Terminal, tmp_path: Path) -> None:
    env = env_for(tmp_path)
    term.run(treadle("chat", "--model", "offline"), env)
    term.wait_for(r"^you> ")
    term.type("remember the blue door", enter=True, prompt=PROMPT)
    term.wait_for(r"tokens in \d+ out \d+\s*\n+you> $")
    term.keys("C-d")
    term.wait_for(r"^EXIT=0")
    session = re.search(r"\(session ([0-9a-f-]{36})\)", term.screen())
    assert session is not None
    term.type("clear", enter=True)
    term.run(treadle("chat", "--model", "offline", "--resume", session.group(1)[:8]), env)
    screen = term.wait_for(r"^you> $")
    assert "(resumed session" in screen
    assert "you> remember the blue door" in screen  # the last exchange, shown
    assert "You said: 'remember the blue door'" in screen
    term.keys("C-d")
    term.wait_for(r"^EXIT=0")

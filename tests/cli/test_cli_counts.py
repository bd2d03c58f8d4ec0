"""Counts in the command line's messages agree with their nouns: "1 message", "2 messages"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from treadle.cli import main


def test_one_message_is_singular(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TREADLE_MODEL", raising=False)
    monkeypatch.setenv("TREADLE_SESSIONS", str(tmp_path / "sessions.db"))
    lines = iter(["hello", "/branch 1", "/session", "/reset", "/session", "/quit"])

    def fake_input(prompt: str = "") -> str:
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    monkeypatch.setattr("builtins.input", fake_input)
    assert main(["chat", "--model", "offline"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\(branched: session \S+, 1 message\)", out), out
    assert re.search(r"session \S+ in .*: 1 message$", out, re.M), out
    assert re.search(r"session \S+ in .*: 0 messages$", out, re.M), out
    assert "1 messages" not in out

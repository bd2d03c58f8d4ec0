"""Files on the command line, through the CLI's entry point: ``treadle run --file`` (the
model gets each file as a FileContent in the user message), ``/attach`` and ``/detach`` in
``treadle chat``, and the errors for a missing file and for one the model cannot take
(before any request)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import treadle.cli as cli
from treadle.cli import main
from treadle.testing import ScriptedProvider
from treadle.types import FileContent, UserMessage

PDF = b"%PDF-1.7\n1 0 obj <</Type /Page>> endobj\n"
MODEL_VARS = ("TREADLE_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No model configured; any session store and history file in tmp_path."""
    for var in (*MODEL_VARS, "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TREADLE_SESSIONS", str(tmp_path / "sessions.db"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def use_provider(monkeypatch: pytest.MonkeyPatch, provider: ScriptedProvider) -> None:
    monkeypatch.setattr(cli, "resolve_model", lambda spec, err=None, **_: (provider, "scripted"))


def feed(monkeypatch: pytest.MonkeyPatch, lines: list[str]) -> None:
    """``input()`` returns ``lines`` one by one, then EOF."""
    queue = iter(lines)

    def fake_input(prompt: str = "") -> str:
        try:
            return next(queue)
        except StopIteration:
            raise EOFError from None

    monkeypatch.setattr("builtins.input", fake_input)


def wav(seconds: int = 1, rate: int = 8000) -> bytes:
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    data = b"\0\0" * rate * seconds
    body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data"
    body += struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "report.pdf").write_bytes(PDF)
    (tmp_path / "sales.csv").write_text("region,total\nnorth,3\n")
    (tmp_path / "call.wav").write_bytes(wav())
    return tmp_path


def files_sent(provider: ScriptedProvider) -> list[FileContent]:
    message = provider.requests[0].messages[-1]
    assert isinstance(message, UserMessage)
    return [b for b in message.content if isinstance(b, FileContent)]


def test_run_file_attaches_each_file_to_the_prompt(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = ScriptedProvider(["A short report."])
    use_provider(monkeypatch, provider)
    pdf, csv = str(folder / "report.pdf"), str(folder / "sales.csv")
    assert main(["run", "--file", pdf, "-f", csv, "summarise"]) == 0
    sent = files_sent(provider)
    assert [(f.name, f.mime_type) for f in sent] == [
        ("report.pdf", "application/pdf"),
        ("sales.csv", "text/csv"),
    ]
    assert sent[0].raw() == PDF
    assert provider.requests[0].messages[-1].text == "summarise"
    assert "A short report." in capsys.readouterr().out


def test_run_file_with_the_offline_model_says_what_it_got(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pdf = str(folder / "report.pdf")
    assert main(["run", "summarise", "--model", "offline", "--file", pdf]) == 0
    assert f"You attached report.pdf (application/pdf, {len(PDF)} bytes)." in (
        capsys.readouterr().out
    )


def test_run_a_missing_file_is_exit_2_naming_it_and_asks_no_model(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = ScriptedProvider(["never"])
    use_provider(monkeypatch, provider)
    missing = str(folder / "nope.pdf")
    assert main(["run", "summarise", "--file", missing]) == 2
    assert f"treadle: no file at {missing!r}" in capsys.readouterr().err
    assert provider.requests == []


def test_run_a_file_the_model_cannot_take_is_refused_before_any_request(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Anthropic takes no audio; its key is fake and nothing is sent (no network).
    code = main(
        [
            "run",
            "transcribe",
            "--model",
            "anthropic:claude-sonnet-4-5",
            "--api-key",
            "sk-ant-not-used",
            "--file",
            str(folder / "call.wav"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "cannot take the audio/wav file 'call.wav' in a user message" in err
    assert "It takes: application/pdf" in err  # UnsupportedFile's message: what it takes


def test_chat_attach_sends_files_with_the_next_message_only(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = ScriptedProvider(["Read it.", "Plain.", "Nothing."])
    use_provider(monkeypatch, provider)
    feed(
        monkeypatch,
        [
            f"/attach {folder / 'report.pdf'}",
            f"/attach '{folder / 'sales.csv'}'",
            "/attach",
            f"/attach {folder / 'gone.pdf'}",
            "summarise",
            "and now?",
            f"/attach {folder / 'sales.csv'}",
            "/detach",
            "again",
        ],
    )
    assert main(["chat", "--no-store"]) == 0
    out = capsys.readouterr().out
    assert f"(attached report.pdf (application/pdf, {len(PDF)} B): it goes with" in out
    assert "(attached: report.pdf (application/pdf, 40 B), sales.csv (text/csv, 21 B);" in out
    assert f"cannot attach {folder / 'gone.pdf'}: no file at" in out
    assert "(detached 1 file)" in out
    sent = [
        [b.name for b in m.content if isinstance(b, FileContent)]
        for m in (r.messages[-1] for r in provider.requests)
    ]
    assert sent == [["report.pdf", "sales.csv"], [], []]  # the next message only


def test_chat_attach_refuses_a_file_the_model_cannot_take(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    feed(monkeypatch, [f"/attach {folder / 'call.wav'}", "/attach"])
    args = ["chat", "--no-store", "--model", "anthropic:claude-sonnet-4-5", "--api-key", "sk-x"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "cannot take the audio/wav file 'call.wav'" in out
    assert "(attached: nothing;" in out

"""The ``treadle`` command: ``run`` and ``chat``, offline, with tools loaded from modules."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import treadle.cli as cli
from treadle import AssistantMessage, ProviderError, TextContent, ToolCall
from treadle.cli import main
from treadle.testing import ScriptedProvider

MODEL_VARS = (
    "TREADLE_MODEL",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
)
OFFLINE_REPLY = "(offline model) You said: {!r}"
TOOL_MODULE = "treadle_cli_test_tools"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No model configured, and any session store the CLI opens lives in tmp_path."""
    for var in MODEL_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TREADLE_SESSIONS", str(tmp_path / "sessions.db"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def feed(monkeypatch: pytest.MonkeyPatch, lines: list[str]) -> list[str]:
    """Make ``input()`` return ``lines`` one by one (then EOF); returns the prompts shown."""
    prompts: list[str] = []
    queue = iter(lines)

    def fake_input(prompt: str = "") -> str:
        prompts.append(prompt)
        try:
            return next(queue)
        except StopIteration:
            raise EOFError from None

    monkeypatch.setattr("builtins.input", fake_input)
    return prompts


def token_counts(out: str, label: str = "offline") -> list[tuple[int, int]]:
    return [
        (int(a), int(b))
        for a, b in re.findall(rf"\[{re.escape(label)}\] tokens in (\d+) out (\d+)", out)
    ]


def use_provider(monkeypatch: pytest.MonkeyPatch, provider: Any, label: str = "scripted") -> None:
    """Point the CLI's model resolution at ``provider`` (for scripts that call tools)."""
    monkeypatch.setattr(cli, "resolve_model", lambda spec, err=None, **_: (provider, label))


@pytest.fixture
def tool_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module on sys.path with tools for ``--tool module:function``."""
    (tmp_path / f"{TOOL_MODULE}.py").write_text(
        textwrap.dedent(
            '''
            CALLS = []


            def shout(text: str) -> str:
                """Shout the text back.

                Args:
                    text: what to shout
                """
                CALLS.append(text)
                return text.upper() + "!"


            def whisper(text: str) -> str:
                """Whisper the text back."""
                return text.lower()


            BOTH = [shout, whisper]
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield TOOL_MODULE
    sys.modules.pop(TOOL_MODULE, None)


# ---------------------------------------------------------------- run


def test_run_with_the_offline_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "hello there", "--model", "offline"]) == 0
    captured = capsys.readouterr()
    assert OFFLINE_REPLY.format("hello there") in captured.out
    assert "No model configured" not in captured.err
    assert token_counts(captured.out) == []  # no status line without --usage


def test_run_usage_prints_the_token_status_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "count me", "--model", "offline", "--usage"]) == 0
    out = capsys.readouterr().out
    counts = token_counts(out)
    assert len(counts) == 1
    tokens_in, tokens_out = counts[0]
    assert tokens_in > 0 and tokens_out > 0


def test_run_without_a_model_says_how_to_configure_one_and_fails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "anyone there?"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("treadle: No model configured")
    assert "--model" in captured.err and "TREADLE_MODEL" in captured.err
    assert "--model offline" in captured.err
    assert captured.out == ""  # nothing was answered


def test_chat_without_a_model_says_so_and_uses_the_offline_model(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    feed(monkeypatch, ["anyone there?"])
    assert main(["chat", "--no-store"]) == 0
    captured = capsys.readouterr()
    assert "No model configured" in captured.err and "offline" in captured.err
    assert OFFLINE_REPLY.format("anyone there?") in captured.out


def test_treadle_model_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TREADLE_MODEL", "offline")
    assert main(["run", "env model", "--usage"]) == 0
    captured = capsys.readouterr()
    assert "No model configured" not in captured.err
    assert len(token_counts(captured.out)) == 1


def test_an_unknown_provider_is_reported_with_exit_code_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "hi", "--model", "nosuchvendor:model-x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("treadle: ") and "nosuchvendor" in err


def test_a_failed_run_exits_1_and_shows_the_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_provider(monkeypatch, ScriptedProvider([ProviderError("auth", "the key was refused")]))
    assert main(["run", "hi"]) == 1
    out = capsys.readouterr().out
    assert "error: auth: the key was refused" in out
    assert "[run ended: error]" in out


def test_a_system_prompt_reaches_the_model(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = ScriptedProvider(["brief answer"])
    use_provider(monkeypatch, provider)
    assert main(["run", "hi", "--system", "Be brief."]) == 0
    assert provider.requests[0].system_prompt == "Be brief."
    assert "brief answer" in capsys.readouterr().out


# ---------------------------------------------------------------- --tool


def test_a_tool_loaded_from_a_module_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tool_module: str
) -> None:
    provider = ScriptedProvider(
        [
            AssistantMessage(content=[ToolCall(id="t1", name="shout", arguments={"text": "hey"})]),
            AssistantMessage(content=[TextContent(text="It shouted back.")]),
        ]
    )
    use_provider(monkeypatch, provider)
    assert main(["run", "shout hey", "--tool", f"{tool_module}:shout"]) == 0

    spec = provider.requests[0].tools[0]
    assert spec.name == "shout" and spec.description == "Shout the text back."
    assert spec.parameters["properties"]["text"]["description"] == "what to shout"
    assert sys.modules[tool_module].CALLS == ["hey"]
    out = capsys.readouterr().out
    assert "→ shout({'text': 'hey'})" in out
    assert "← shout: HEY!" in out
    assert "It shouted back." in out


def test_a_list_of_tools_and_the_offline_model(
    capsys: pytest.CaptureFixture[str], tool_module: str
) -> None:
    assert (
        main(
            [
                "run",
                "hi",
                "--model",
                "offline",
                "--tool",
                f"{tool_module}:BOTH",
                "-t",
                f"{tool_module}:shout",
            ]
        )
        == 2
    ), "shout twice is a duplicate tool name"
    assert "shout" in capsys.readouterr().err

    assert main(["run", "hi", "--model", "offline", "--tool", f"{tool_module}:BOTH"]) == 0


def test_a_tool_spec_without_a_colon_is_refused() -> None:
    with pytest.raises(SystemExit, match=re.escape("package.module:function")):
        main(["run", "hi", "--model", "offline", "--tool", "just_a_module"])


# ---------------------------------------------------------------- chat


def test_chat_commands(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    prompts = feed(
        monkeypatch,
        [
            "hello",
            "/usage",
            "/model",
            "/model offline",
            "/model nosuchvendor:x",
            "/reset",
            "/usage",
            "",
            "/help",
            "again",
            "/quit",
            "never read",
        ],
    )
    assert main(["chat", "--model", "offline"]) == 0
    out = capsys.readouterr().out

    assert out.startswith("treadle chat · offline")
    assert OFFLINE_REPLY.format("hello") in out
    assert OFFLINE_REPLY.format("again") in out
    assert "model: offline" in out
    assert "(model: offline)" in out
    assert "cannot use 'nosuchvendor:x'" in out
    assert "(new conversation)" in out
    assert "/model NAME" in out  # /help prints the command list
    counts = token_counts(out)
    # status after "hello", /usage, /usage after /reset, status after "again"
    assert len(counts) == 4
    assert counts[0] == counts[1] and counts[0][0] > 0
    assert counts[2] == (0, 0)
    assert counts[3][0] > 0
    assert len(prompts) == 11 and all(p == "you> " for p in prompts)  # stopped at /quit


def test_chat_reset_starts_a_new_conversation(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = ScriptedProvider(["one", "two", "three"])
    use_provider(monkeypatch, provider)
    feed(monkeypatch, ["first", "second", "/reset", "third", "/exit"])
    assert main(["chat"]) == 0
    seen = [[getattr(m, "text", "") for m in r.messages] for r in provider.requests]
    assert seen == [["first"], ["first", "one", "second"], ["third"]]
    assert "three" in capsys.readouterr().out


def test_chat_ends_on_eof(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    feed(monkeypatch, ["hi"])
    assert main(["chat", "--model", "offline"]) == 0
    assert OFFLINE_REPLY.format("hi") in capsys.readouterr().out


def test_chat_with_a_tool_from_a_module(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tool_module: str
) -> None:
    provider = ScriptedProvider(
        [
            AssistantMessage(
                content=[ToolCall(id="t1", name="whisper", arguments={"text": "QUIET"})]
            ),
            AssistantMessage(content=[TextContent(text="Whispered.")]),
        ]
    )
    use_provider(monkeypatch, provider)
    feed(monkeypatch, ["whisper QUIET", "/quit"])
    assert main(["chat", "--tool", f"{tool_module}:whisper"]) == 0
    out = capsys.readouterr().out
    assert "← whisper: quiet" in out and "Whispered." in out


def test_a_key_in_the_environment_picks_that_provider(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-used")
    provider, label = cli.resolve_model(None)
    assert label == "anthropic:claude-sonnet-4-5"
    assert getattr(provider, "name", "") == "anthropic"
    assert "sk-test-not-used" not in repr(provider)
    assert capsys.readouterr().err == ""


def test_chat_compact_summarises_the_conversation(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    long = "word " * 300
    provider = ScriptedProvider([f"a{i} {long}" for i in range(4)] + ["THE SUMMARY", "fine"])
    use_provider(monkeypatch, provider)
    feed(monkeypatch, [f"q{i} {long}" for i in range(4)] + ["/compact", "next", "/quit"])
    assert main(["chat"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\(compacted: 8 -> \d+ messages", out)
    last = [getattr(m, "text", "") for m in provider.requests[-1].messages]
    assert any("THE SUMMARY" in text for text in last), "the next request uses the summary"
    assert len(last) < 9


# ---------------------------------------------------------------- everyday details


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import treadle

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"treadle {treadle.__version__}"


def test_run_dash_reads_the_prompt_from_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("piped question\n"))
    assert main(["run", "-", "--model", "offline"]) == 0
    assert OFFLINE_REPLY.format("piped question") in capsys.readouterr().out


def test_a_tool_module_in_the_current_directory_is_found(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "cwd_tools_for_treadle.py").write_text(
        "def loud(text: str) -> str:\n    '''Shout.'''\n    return text.upper()\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    call = AssistantMessage(content=[ToolCall(id="c1", name="loud", arguments={"text": "hi"})])
    use_provider(monkeypatch, ScriptedProvider([call, "Done."]))
    assert main(["run", "go", "--tool", "cwd_tools_for_treadle:loud"]) == 0
    assert "← loud: HI" in capsys.readouterr().out


def test_api_key_and_base_url_options_reach_the_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from anyio.from_thread import start_blocking_portal

    from treadle.testing import WireFake, serve

    fake = WireFake.openai("From the server.")
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(serve(fake)) as url:
        code = main(
            [
                "run",
                "hi",
                "--model",
                "openai:gpt-4o-mini",
                "--api-key",
                "sk-test-cli-key",
                "--base-url",
                f"{url}/v1",
            ]
        )
    captured = capsys.readouterr()
    assert code == 0 and "From the server." in captured.out
    assert fake.requests[0].headers["authorization"] == "Bearer sk-test-cli-key"
    assert "sk-test-cli-key" not in captured.out + captured.err


def test_a_missing_key_error_points_at_the_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "hi", "--model", "openai:gpt-4o-mini"]) == 2
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY" in err and "--api-key" in err


def test_python_dash_m_treadle() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "treadle", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "usage: treadle" in done.stdout

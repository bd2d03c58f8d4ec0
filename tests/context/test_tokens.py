"""Token estimates (contract §6): tiktoken, the heuristic fallback, anchoring on reported
usage, and incremental counting."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from treadle import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage
from treadle.context import ContextTracker, TokenCounter, count_tokens, estimate_tokens
from treadle.context import tokens as tokens_module
from treadle.types import ExtensionMessage, ImageContent, ToolSpec

TEXT = "The quick brown fox jumps over the lazy dog. " * 20


def test_tiktoken_counts_with_the_cached_encoding() -> None:
    assert os.environ.get("TIKTOKEN_CACHE_DIR")  # set by tests/conftest.py
    counter = TokenCounter("claude-sonnet-4-5")
    assert counter.encoding_name == "cl100k_base"
    assert counter.exact
    assert counter.text("hello world") == 2
    assert counter.text(TEXT) == 201  # cl100k: 10 tokens a sentence, plus the last one


def test_modern_openai_models_fall_back_to_cl100k_offline() -> None:
    # o200k_base is not in the offline cache: the counter falls back to cl100k_base.
    counter = TokenCounter("gpt-4o-mini")
    assert counter.candidates() == ["o200k_base", "cl100k_base"]
    assert counter.encoding_name in ("o200k_base", "cl100k_base")
    assert counter.text("hello world") == 2


def test_heuristic_when_forced() -> None:
    counter = TokenCounter("gpt-4o", encoding=None)
    assert counter.encoding_name is None and not counter.exact
    assert counter.text("abcd" * 25) == 25
    assert counter.text("abcde") == 2
    # 16 characters of framing per message
    assert counter.message(UserMessage.of("abcd" * 25)) == 25 + 4


def test_heuristic_when_no_encoding_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens_module, "_encodings", {})
    monkeypatch.setattr(tokens_module, "load_encoding", lambda name: None)
    counter = TokenCounter("gpt-4o")
    assert counter.encoding_name is None
    assert counter.text("x" * 40) == 10


def test_unknown_encoding_name_falls_back() -> None:
    counter = TokenCounter(encoding="no_such_encoding")
    assert counter.encoding_name is None
    assert counter.text("x" * 8) == 2


def test_import_is_lazy() -> None:
    code = (
        "import sys, treadle, treadle.context\n"
        "assert 'tiktoken' not in sys.modules, 'tiktoken imported by import treadle'\n"
        "assert 'treadle.context.compaction' not in sys.modules\n"
        "from treadle.context import TokenCounter\n"
        "assert 'tiktoken' not in sys.modules\n"
        "TokenCounter('x').text('hi')\n"
        "assert 'tiktoken' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_message_counts_cover_every_block() -> None:
    counter = TokenCounter(encoding=None)
    call = ToolCall(id="c1", name="search", arguments={"q": "x" * 40})
    assistant = AssistantMessage(content=[TextContent(text="a" * 40), call])
    assert counter.message(assistant) > counter.message(AssistantMessage(content="a" * 40))
    image = ImageContent(data="AAAA", mime_type="image/png")
    with_image = UserMessage(content=[TextContent(text="see"), image])
    assert counter.message(with_image) >= tokens_module.IMAGE_TOKENS
    result = ToolResultMessage(tool_call_id="c1", tool_name="search", content="y" * 400)
    assert counter.message(result) >= 100
    assert counter.message(ExtensionMessage(kind="note", data="z" * 1000)) == 0


def test_tool_definitions_count() -> None:
    counter = TokenCounter(encoding=None)
    spec = ToolSpec(name="search", description="Search the web " * 10)
    assert counter.tools([spec]) > counter.tools([]) == 0


def _usage(tokens: int) -> Usage:
    return Usage(input=tokens - 10, output=10, total_tokens=tokens)


def test_estimate_is_anchored_on_reported_usage() -> None:
    tracker = ContextTracker(TokenCounter(encoding=None))
    history = [
        UserMessage.of("x" * 4000),  # would be ~1000 tokens if counted
        AssistantMessage(
            content=[ToolCall(id="c1", name="f")], stop_reason="tool_use", usage=_usage(500)
        ),
        ToolResultMessage(tool_call_id="c1", tool_name="f", content="r" * 400),
    ]
    estimate = tracker.estimate(history)
    assert estimate.anchored and estimate.anchor_index == 1
    # reported usage (500) plus the one message after it (f + 400 chars + framing)
    assert estimate.tokens == 500 + tracker.counter.message(history[2])


def test_estimate_counts_without_usage() -> None:
    tracker = ContextTracker(TokenCounter(encoding=None))
    history = [UserMessage.of("x" * 400), AssistantMessage(content="y" * 400)]
    estimate = tracker.estimate(history, system_prompt="s" * 40)
    assert not estimate.anchored
    assert estimate.tokens == (100 + 4) * 2 + (10 + 4)
    assert estimate_tokens(history, system_prompt="s" * 40, encoding=None) == estimate.tokens


def test_reasoning_tokens_are_not_carried_into_the_next_request() -> None:
    usage = Usage(input=1000, output=3000, reasoning=2800, total_tokens=4000)
    history = [UserMessage.of("q"), AssistantMessage(content="a", usage=usage)]
    assert estimate_tokens(history, encoding=None) == 1200


def test_floor_ignores_usage_reported_before_a_compaction() -> None:
    tracker = ContextTracker(TokenCounter(encoding=None))
    history = [UserMessage.of("x" * 40), AssistantMessage(content="ok", usage=_usage(90_000))]
    assert tracker.estimate(history).tokens == 90_000
    tracker.reset(history)  # as after a compaction that kept both messages
    estimate = tracker.estimate(history)
    assert not estimate.anchored and estimate.tokens < 100


def test_count_tokens_helper() -> None:
    assert count_tokens("hello world", encoding="cl100k_base") == 2
    assert count_tokens("abcdefgh", encoding=None) == 2


class _Spy(TokenCounter):
    """Counts how many messages get tokenised."""

    calls = 0

    def message(self, message: object) -> int:  # type: ignore[override]
        type(self).calls += 1
        return super().message(message)  # type: ignore[arg-type]


@pytest.mark.parametrize("with_usage", [True, False])
def test_incremental_counting_is_o_new_messages(with_usage: bool) -> None:
    _Spy.calls = 0
    tracker = ContextTracker(_Spy(encoding=None))
    history: list[object] = [UserMessage.of("start")]
    tokenised_per_turn = []
    for turn in range(200):
        calls = [ToolCall(id=f"c{turn}", name="f")]
        usage = _usage(100 + turn * 50) if with_usage else Usage()
        history.append(AssistantMessage(content=calls, stop_reason="tool_use", usage=usage))
        history.append(ToolResultMessage(tool_call_id=f"c{turn}", tool_name="f", content="ok"))
        before = _Spy.calls
        tracker.estimate(history, system_prompt="sys")  # type: ignore[arg-type]
        tokenised_per_turn.append(_Spy.calls - before)
    # each turn tokenises only the messages it added (anchored: just the tool result)
    assert max(tokenised_per_turn[1:]) <= 2
    assert _Spy.calls <= 2 * 200 + 1
    assert tracker.tokenized == _Spy.calls


def test_replaced_history_is_recounted_from_the_cache() -> None:
    _Spy.calls = 0
    tracker = ContextTracker(_Spy(encoding=None))
    history = [UserMessage.of(f"m{i}") for i in range(50)]
    tracker.estimate(history)
    assert _Spy.calls == 50
    shorter = [history[0], UserMessage.of("summary"), *history[40:]]
    tracker.reset(shorter)
    estimate = tracker.estimate(shorter)
    assert _Spy.calls == 51  # only the new summary message was tokenised
    assert estimate.tokens == sum(tracker.count(m) for m in shorter)

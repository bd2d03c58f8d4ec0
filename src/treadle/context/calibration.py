"""Calibration: estimates brought in line with what the provider counts.

tiktoken counts OpenAI's tokens; a local model's tokenizer (llama.cpp, Ollama, vLLM) or
Claude's may make half as many again from the same text, and then a request the estimate
puts at 80 % of the window overflows it. Two things the provider says fix the estimate:

- the usage of an earlier call: its prompt tokens against what the tracker counts for the
  request that call answered give a *ratio* (provider tokens per counted token);
- an overflow error that names sizes ("request (2446 tokens) exceeds the available context
  size (2048 tokens)"): the request size gives the ratio as well, the limit is the real
  context window, whatever the catalog or the policy said.

A :class:`Calibration` is kept per provider and model in ``context.state`` (plain numbers,
so a saved session keeps it), never in process-global state: two agents on two servers
calibrate apart.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from ..providers.base import ProviderError

CALIBRATION_KEY = "treadle.context.calibration"
"""``context.state`` key: ``{"provider:model": {"ratio": float, "window": int | None}}``."""

MIN_SAMPLE_TOKENS = 200
"""A request smaller than this (as counted) does not set the ratio: the fixed framing of a
chat template would dominate it."""

MAX_RATIO = 4.0
"""The largest ratio believed (no tokenizer makes four times tiktoken's tokens of text)."""


@dataclass(frozen=True)
class OverflowSizes:
    """What an overflow error says: the request's size and the most the provider accepts
    for it (the context window, less the room reserved for the answer where the provider
    counts that in), in the provider's tokens; ``None`` where it says nothing."""

    requested: int | None = None
    limit: int | None = None


def _number(text: str) -> int:
    return int(text.replace(",", ""))


_N = r"(\d[\d,]*)"
# (pattern, group of the request size, group of the limit, group of a reserve subtracted
# from the limit) for each wording with numbers that servers send.
_SHAPES: tuple[tuple[re.Pattern[str], int, int, int | None], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE | re.DOTALL), requested, limit, reserve)
    for pattern, requested, limit, reserve in (
        # llama.cpp
        (rf"request \({_N} tokens\) exceeds the available context size \({_N} tokens", 1, 2, None),
        # vLLM: the prompt and the completion it asked room for
        (
            rf"maximum context length is {_N} tokens.*?requested {_N} tokens \({_N} in the "
            rf"messages, {_N} in the completion\)",
            3,
            1,
            4,
        ),
        # OpenAI, and vLLM's other wordings
        (rf"maximum context length is {_N} tokens.*?(?:resulted in|requested) {_N}", 2, 1, None),
        (rf"decoder prompt \(length {_N}\).*?maximum model length of {_N}", 1, 2, None),
        # Anthropic
        (rf"prompt is too long: {_N} tokens > {_N} maximum", 1, 2, None),
        (rf"input length and `?max_tokens`? exceed context limit: {_N} \+ {_N} > {_N}", 1, 3, 2),
        # Gemini
        (rf"input token count \({_N}\) exceeds the maximum number of tokens.*?\({_N}", 1, 2, None),
        # LM Studio
        (rf"keep the first {_N} tokens.*?context length of only {_N} tokens", 1, 2, None),
        # what treadle's adapters add from a body's fields (llama.cpp's n_prompt_tokens/n_ctx)
        (rf"\(request: {_N} tokens, context size: {_N} tokens\)", 1, 2, None),
    )
)


def overflow_sizes(message: str) -> OverflowSizes:
    """The sizes an overflow error's message names (see :class:`OverflowSizes`)."""
    for pattern, requested, limit, reserve in _SHAPES:
        match = pattern.search(message)
        if match is None:
            continue
        cap = _number(match.group(limit))
        if reserve is not None:
            cap -= _number(match.group(reserve))
        return OverflowSizes(_number(match.group(requested)), cap if cap > 0 else None)
    return OverflowSizes()


@dataclass
class Calibration:
    """What one provider and model count, learned during runs: ``ratio`` (provider tokens
    per counted token, at least 1.0) and ``window`` (the context size an overflow error
    named, or ``None``)."""

    ratio: float = 1.0
    window: int | None = None

    @classmethod
    def load(cls, state: MutableMapping[str, Any], key: str) -> Calibration:
        stored = state.get(CALIBRATION_KEY)
        entry = stored.get(key) if isinstance(stored, dict) else None
        if not isinstance(entry, dict):
            return cls()
        ratio, window = entry.get("ratio"), entry.get("window")
        if not (isinstance(ratio, (int, float)) and 1.0 <= ratio <= MAX_RATIO):
            ratio = 1.0
        if not (isinstance(window, int) and window > 0):
            window = None
        return cls(float(ratio), window)

    def save(self, state: MutableMapping[str, Any], key: str) -> None:
        stored = state.get(CALIBRATION_KEY)
        if not isinstance(stored, dict):
            stored = state[CALIBRATION_KEY] = {}
        stored[key] = {"ratio": round(self.ratio, 4), "window": self.window}

    def observe(self, reported: int, counted: int, *, minimum: int = MIN_SAMPLE_TOKENS) -> bool:
        """Take the ratio from a request the provider reported ``reported`` tokens for and
        the tracker counted ``counted`` (uncalibrated); samples under ``minimum`` counted
        tokens are ignored. Returns whether the ratio changed."""
        if counted < max(1, minimum) or reported <= 0:
            return False
        ratio = min(MAX_RATIO, max(1.0, reported / counted))
        if abs(ratio - self.ratio) < 0.01:
            return False
        self.ratio = ratio
        return True

    def limit(self, window: int) -> bool:
        """Learn that the provider accepts at most ``window`` tokens. Returns whether it
        changed."""
        if window <= 0 or window == self.window:
            return False
        self.window = window
        return True


def unfit_error(
    error: ProviderError, tried: list[str], exhausted: bool, left: int, window: int | None
) -> ProviderError:
    """The error a model call ends with when compaction cannot make its request fit: the
    provider's message, then what was tried (``tried``: each compaction's strategies and
    the size reached), why it stopped, and the context size the provider named."""
    done = f"compacted {len(tried)} time(s) ({'; '.join(tried)}), " if tried else ""
    if exhausted:
        what = f" enough: {done}and the request is still too long"
    else:
        what = f": {done}{left} messages, nothing left to drop or summarise"
    if window:
        what += f"; the provider's context holds {window:,} tokens"
    return ProviderError(
        "context_overflow",
        f"{error.message} (compaction could not shrink the request{what}; shorten the "
        "input, or use a model with a larger context window)",
        status_code=error.status_code,
        provider=error.provider,
    )


__all__ = ["CALIBRATION_KEY", "Calibration", "OverflowSizes", "overflow_sizes", "unfit_error"]

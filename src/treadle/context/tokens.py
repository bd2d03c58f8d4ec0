"""Token estimates: how much of the context window a history fills (docs/contract.md §6).

The estimate is anchored on what the provider reported: the last assistant message's usage
(input + output + cache reads and writes) is exactly how many tokens the history up to and
including that message took, so only the messages after it are estimated. Those are counted
with tiktoken when an encoding loads (``o200k_base`` for current OpenAI models, else
``cl100k_base``; ``TIKTOKEN_CACHE_DIR`` is honoured by tiktoken itself) and otherwise with
a heuristic: about 4 characters per token plus 16 characters per message.

Counting is incremental: :class:`ContextTracker` caches each message's count (keyed by the
message object, which it keeps alive so the key cannot be reused) and keeps a running total
for histories that never report usage, so one turn costs O(new messages), not O(history).
tiktoken is imported only when the first encoding is needed.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, Union

from ..types import (
    AgentMessage,
    AssistantMessage,
    ExtensionMessage,
    FileContent,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolSpec,
)
from .files import file_tokens

CHARS_PER_TOKEN = 4
"""The heuristic's characters per token."""
MESSAGE_OVERHEAD_TOKENS = 4
"""Role and framing per message: 16 characters, as tokens."""
TOOL_CALL_OVERHEAD_TOKENS = 8
"""Framing of one tool call (id, type, function wrapper)."""
TOOL_SPEC_OVERHEAD_TOKENS = 8
"""Framing of one tool definition in the request."""
IMAGE_TOKENS = 1000
"""A flat estimate per image (providers charge roughly 500-1600 for a typical image)."""

Auto = Literal["auto"]


class _Encoding(Protocol):
    def encode_ordinary(self, text: str) -> list[int]: ...


_encodings: dict[str, Union[_Encoding, None]] = {}  # loaded once per process; failures too
_loading: set[str] = set()  # loads in progress (possibly in an abandoned worker thread)
_load_lock = threading.Lock()


def encoding_for_model(model: str) -> str:
    """The tiktoken encoding closest to ``model``'s tokenizer: ``o200k_base`` for GPT-4o,
    GPT-4.1, GPT-5 and the o-series, ``cl100k_base`` for everything else (other vendors'
    tokenizers are not public in tiktoken; cl100k is a fair approximation)."""
    name = model.lower().rsplit("/", 1)[-1]
    if name.startswith(("gpt-4o", "gpt-4.1", "gpt-5", "chatgpt-4o", "gpt-oss")):
        return "o200k_base"
    if len(name) > 1 and name[0] == "o" and name[1].isdigit():
        return "o200k_base"
    return "cl100k_base"


def load_encoding(name: str) -> _Encoding | None:
    """The tiktoken encoding ``name``, or ``None`` when tiktoken or the encoding file is not
    available (offline without a cache). The outcome is remembered for the process, so a
    missing encoding costs one failed attempt, not one per call."""
    if name in _encodings:
        return _encodings[name]
    with _load_lock:
        if name in _encodings:
            return _encodings[name]
        _loading.add(name)
        encoding: _Encoding | None
        try:
            import tiktoken

            encoding = tiktoken.get_encoding(name)
        except Exception:  # no tiktoken, no network, no cache, unknown name
            encoding = None
        finally:
            _loading.discard(name)
        _encodings[name] = encoding
        return encoding


def encoding_loaded(name: str) -> bool:
    """True once :func:`load_encoding` has tried ``name`` (whatever the outcome)."""
    return name in _encodings


def encoding_loading(name: str) -> bool:
    """True while a :func:`load_encoding` of ``name`` is under way (in any thread)."""
    return name in _loading


class TokenCounter:
    """Counts tokens of text, messages and tool definitions for one model.

    ``encoding``: ``"auto"`` picks the model's tiktoken encoding and falls back to
    ``cl100k_base``, then to the heuristic; a name uses that encoding (falling back to the
    heuristic); ``None`` always uses the heuristic. The encoding is loaded on first use.
    """

    __slots__ = ("_encoding", "_resolved", "encoding", "model")

    def __init__(self, model: str = "", *, encoding: str | Auto | None = "auto") -> None:
        self.model = model
        self.encoding = encoding
        self._resolved = False
        self._encoding: _Encoding | None = None

    def candidates(self) -> list[str]:
        """Encodings to try, in order."""
        if self.encoding is None:
            return []
        if self.encoding != "auto":
            return [self.encoding]
        first = encoding_for_model(self.model)
        return [first] if first == "cl100k_base" else [first, "cl100k_base"]

    def _resolve(self) -> _Encoding | None:
        if not self._resolved:
            for name in self.candidates():
                found = load_encoding(name)
                if found is not None:
                    self._encoding = found
                    break
            self._resolved = True
        return self._encoding

    def use_loaded_only(self) -> None:
        """Settle on an encoding that is already loaded (or the heuristic) and never load
        or wait for one later: for callers that preloaded in a worker thread and must not
        block their event loop if that did not finish."""
        if not self._resolved:
            for name in self.candidates():
                found = _encodings.get(name)
                if found is not None:
                    self._encoding = found
                    break
            self._resolved = True

    @property
    def encoding_name(self) -> str | None:
        """The tiktoken encoding in use, or ``None`` for the heuristic."""
        encoding = self._resolve()
        return getattr(encoding, "name", None) if encoding is not None else None

    @property
    def exact(self) -> bool:
        """True when counting with a real tokenizer rather than the heuristic."""
        return self._resolve() is not None

    def text(self, text: str) -> int:
        """Tokens in ``text``."""
        if not text:
            return 0
        encoding = self._resolve()
        if encoding is None:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        return len(encoding.encode_ordinary(text))

    def message(self, message: AgentMessage) -> int:
        """Tokens ``message`` takes in a request (0 for extension messages, which are never
        sent)."""
        if isinstance(message, ExtensionMessage):
            return 0
        text, extra = _message_text(message)
        return self.text(text) + extra

    def tools(self, specs: Iterable[ToolSpec]) -> int:
        """Tokens the tool definitions add to a request."""
        total = 0
        for spec in specs:
            text = f"{spec.name}\n{spec.description}\n{json.dumps(spec.parameters)}"
            total += self.text(text) + TOOL_SPEC_OVERHEAD_TOKENS
        return total

    def messages(self, messages: Iterable[AgentMessage]) -> int:
        return sum(self.message(m) for m in messages)


def _message_text(message: AgentMessage) -> tuple[str, int]:
    """The text of ``message`` a tokenizer sees, and the tokens of framing around it."""
    parts: list[str] = []
    extra = MESSAGE_OVERHEAD_TOKENS
    if isinstance(message, AssistantMessage):
        for block in message.content:
            if isinstance(block, TextContent):
                parts.append(block.text)
            elif isinstance(block, ThinkingContent):
                parts.append(block.thinking)
            elif isinstance(block, ToolCall):
                extra += TOOL_CALL_OVERHEAD_TOKENS
                parts.append(block.name)
                if block.raw_arguments is not None:
                    parts.append(block.raw_arguments)
                elif block.arguments:
                    parts.append(json.dumps(block.arguments, ensure_ascii=False))
    elif not isinstance(message, ExtensionMessage):
        if message.role == "tool_result":
            parts.append(message.tool_name)
        for item in message.content:
            if isinstance(item, TextContent):
                parts.append(item.text)
            elif isinstance(item, ImageContent):
                extra += IMAGE_TOKENS
            elif isinstance(item, FileContent):  # a text file's text, else pages, seconds
                extra += file_tokens(item)
                if item.kind == "text" and item.data is not None:
                    parts.append(item.text())
    return "\n".join(parts), extra


def text_bound(text: str) -> int:
    """An upper bound of the tokens of ``text`` without tokenising: byte-level BPE never
    makes more tokens than the text has UTF-8 bytes (the heuristic makes fewer still)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def token_bound(message: AgentMessage) -> int:
    """An upper bound of :meth:`TokenCounter.message` without tokenising."""
    if isinstance(message, ExtensionMessage):
        return 0
    text, extra = _message_text(message)
    return text_bound(text) + extra


def heuristic_tokens(text: str) -> int:
    """The heuristic estimate of ``text``: about one token per 4 characters."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def anchor_tokens(message: AssistantMessage, counter: TokenCounter | None = None) -> int:
    """The context size the provider reported with ``message`` (its request plus the message
    itself), or 0 when it reported no usage. Hidden reasoning is left out: providers do not
    carry it into the next request, only the thinking blocks the message kept."""
    usage = message.usage
    tokens = usage.context_tokens
    if tokens <= 0:
        return 0
    if usage.reasoning and usage.reasoning < tokens:
        tokens -= usage.reasoning
        thinking = message.thinking
        if thinking:
            tokens += counter.text(thinking) if counter else heuristic_tokens(thinking)
    return tokens


@dataclass(frozen=True, slots=True)
class ContextEstimate:
    """How many tokens a history fills. ``anchored``: built on the provider's reported usage
    (``anchor_index`` is that assistant message's position); otherwise counted."""

    tokens: int
    anchored: bool
    anchor_index: int | None = None


class ContextTracker:
    """The context size of one history, kept up to date incrementally.

    Each message is tokenised once (``tokenized`` counts how many times a message was
    tokenised, for tests and benchmarks). ``estimate`` anchors on the last assistant message
    with usage at or after ``floor`` — messages before the floor were rewritten by a
    compaction, so their reported usage no longer describes the history. ``reset`` after
    the history was replaced.

    ``scale`` calibrates counts to the provider's tokenizer (docs/context.md, calibration):
    every count the tracker gives is the counter's times ``scale`` (1.0: as counted);
    reported usage is exact and never scaled. :meth:`raw` gives unscaled counts.
    """

    def __init__(self, counter: TokenCounter | None = None, *, scale: float = 1.0) -> None:
        self.counter = counter if counter is not None else TokenCounter()
        self.scale = scale
        self.floor = 0
        self.tokenized = 0
        self._counts: dict[int, tuple[AgentMessage, int]] = {}
        # running total of the counted history (for histories without usage)
        self._sum_len = 0
        self._sum_last: AgentMessage | None = None
        self._sum_total = 0
        # no anchor exists before this index (scans stop here)
        self._scan_len = 0
        self._scan_last: AgentMessage | None = None
        self._scan_found: int | None = None
        self._tools_key: tuple[int, ...] | None = None
        self._tools_tokens = 0
        self._system: tuple[str, int] | None = None

    # ---- per message ----

    def scaled(self, raw: int) -> int:
        """``raw`` counted tokens as the provider would count them."""
        return raw if self.scale == 1.0 else math.ceil(raw * self.scale)

    def raw_count(self, message: AgentMessage) -> int:
        """Tokens of ``message`` as the counter counts them (tokenised once, then cached)."""
        hit = self._counts.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        tokens = self.counter.message(message)
        self.tokenized += 1
        self._counts[id(message)] = (message, tokens)
        return tokens

    def count(self, message: AgentMessage) -> int:
        """Tokens of ``message``, calibrated (see ``scale``)."""
        return self.scaled(self.raw_count(message))

    def raw(self, messages: Iterable[AgentMessage]) -> int:
        """Sum of the messages' uncalibrated counts (cached per message)."""
        return sum(self.raw_count(m) for m in messages)

    def tools(self, specs: Sequence[ToolSpec], key: tuple[int, ...] | None = None) -> int:
        """Tokens of the tool definitions, uncalibrated; cached under ``key`` (for example
        the ids of the tool objects) when given."""
        if key is not None and key == self._tools_key:
            return self._tools_tokens
        tokens = self.counter.tools(specs)
        if key is not None:
            self._tools_key, self._tools_tokens = key, tokens
        return tokens

    # ---- whole history ----

    def measure(self, messages: Sequence[AgentMessage]) -> int:
        """Sum of the messages' counts (no system prompt, no tools), calibrated,
        incrementally: when the history only grew since the last call, only the new
        messages are added."""
        n = self._sum_len
        if n and len(messages) >= n and messages[n - 1] is self._sum_last:
            total = self._sum_total + self.raw(messages[n:])
        else:
            total = self.raw(messages)
        self._sum_len = len(messages)
        self._sum_last = messages[-1] if messages else None
        self._sum_total = total
        return self.scaled(total)

    def _anchor(self, messages: Sequence[AgentMessage]) -> int | None:
        """Index of the last assistant message (at or after the floor) with usage."""
        stop = self.floor
        n = self._scan_len
        if n and len(messages) >= n and messages[n - 1] is self._scan_last:
            # only messages appended since the last scan can hold a newer anchor
            stop = max(stop, n)
            found = self._scan_found
        else:
            found = None
        for i in range(len(messages) - 1, stop - 1, -1):
            message = messages[i]
            if isinstance(message, AssistantMessage) and message.usage.context_tokens > 0:
                found = i
                break
        if found is not None and found < self.floor:
            found = None
        self._scan_len = len(messages)
        self._scan_last = messages[-1] if messages else None
        self._scan_found = found
        return found

    def upper_bound(self, messages: Sequence[AgentMessage]) -> int | None:
        """A cheap upper bound of :meth:`anchored` that tokenises nothing (messages not yet
        counted are bounded by their byte length), for deciding that nothing needs doing;
        ``None`` without an anchor."""
        index = self._anchor(messages)
        if index is None:
            return None
        anchor = messages[index]
        assert isinstance(anchor, AssistantMessage)
        total = anchor.usage.context_tokens  # reasoning included: a bound, and no tokenising
        for message in messages[index + 1 :]:
            hit = self._counts.get(id(message))
            if hit is not None and hit[0] is message:
                total += self.scaled(hit[1])
            else:  # the byte length bounds a byte-level tokenizer's count, calibrated or not
                total += token_bound(message)
        return total

    def anchored(self, messages: Sequence[AgentMessage]) -> ContextEstimate | None:
        """The estimate built on the last reported usage, or ``None`` when no assistant
        message at or after the floor reported any."""
        index = self._anchor(messages)
        if index is None:
            return None
        anchor = messages[index]
        assert isinstance(anchor, AssistantMessage)
        tokens = anchor_tokens(anchor, self.counter)
        tokens += self.scaled(self.raw(messages[index + 1 :]))
        return ContextEstimate(tokens, True, index)

    def counted(self, messages: Sequence[AgentMessage], fixed: int = 0) -> ContextEstimate:
        """The estimate from counting every message (incrementally), plus ``fixed`` tokens
        for the system prompt and tools."""
        return ContextEstimate(fixed + self.measure(messages), False)

    def estimate(
        self,
        messages: Sequence[AgentMessage],
        *,
        system_prompt: str | None = None,
        tools: Sequence[ToolSpec] = (),
        tools_key: tuple[int, ...] | None = None,
    ) -> ContextEstimate:
        """Tokens the next request built from ``messages`` will take (docs/contract.md §6)."""
        return self.anchored(messages) or self.counted(
            messages, self.fixed(system_prompt, tools, tools_key)
        )

    def fixed(
        self,
        system_prompt: str | None,
        tools: Sequence[ToolSpec] = (),
        tools_key: tuple[int, ...] | None = None,
    ) -> int:
        """Tokens of the parts of a request outside the history, calibrated."""
        return self.scaled(self.fixed_raw(system_prompt, tools, tools_key))

    def fixed_raw(
        self,
        system_prompt: str | None,
        tools: Sequence[ToolSpec] = (),
        tools_key: tuple[int, ...] | None = None,
    ) -> int:
        """:meth:`fixed` as the counter counts it (uncalibrated)."""
        system = 0
        if system_prompt:
            if self._system is None or self._system[0] != system_prompt:
                self._system = (system_prompt, self.counter.text(system_prompt))
            system = self._system[1] + MESSAGE_OVERHEAD_TOKENS
        return system + self.tools(tools, tools_key)

    def reset(self, messages: Sequence[AgentMessage] | None = None) -> None:
        """The history was replaced (compaction): forget the running totals, drop cached
        counts of messages that left it, and ignore usage reported before this point."""
        self._sum_len = 0
        self._sum_last = None
        self._sum_total = 0
        self._scan_len = 0
        self._scan_last = None
        self._scan_found = None
        if messages is not None:
            self.floor = len(messages)
            keep = {id(m) for m in messages}
            self._counts = {k: v for k, v in self._counts.items() if k in keep}


def estimate_tokens(
    messages: Sequence[AgentMessage],
    *,
    model: str = "",
    system_prompt: str | None = None,
    tools: Sequence[ToolSpec] = (),
    encoding: str | Auto | None = "auto",
) -> int:
    """One-off estimate of the request ``messages`` would make (anchored on reported usage
    when there is some). For repeated estimates of a growing history use a
    :class:`ContextTracker`, which does not recount."""
    tracker = ContextTracker(TokenCounter(model, encoding=encoding))
    return tracker.estimate(messages, system_prompt=system_prompt, tools=tools).tokens


def count_tokens(text: str, *, model: str = "", encoding: str | Auto | None = "auto") -> int:
    """Tokens in ``text`` for ``model`` (tiktoken when it loads, else the heuristic)."""
    return TokenCounter(model, encoding=encoding).text(text)


def _reset_encodings_for_tests(names: Sequence[str] = ()) -> None:
    """Forget loaded encodings (all, or ``names``) so a test can load them again."""
    with _load_lock:
        for name in list(names) or list(_encodings):
            _encodings.pop(name, None)


__all__ = [
    "CHARS_PER_TOKEN",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "ContextEstimate",
    "ContextTracker",
    "TokenCounter",
    "anchor_tokens",
    "count_tokens",
    "encoding_for_model",
    "estimate_tokens",
    "heuristic_tokens",
    "load_encoding",
    "text_bound",
    "token_bound",
]

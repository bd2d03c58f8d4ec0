"""A catalog of models: context window, output limit and list prices.

Lookup is by model name, as providers spell it: dated snapshots (``gpt-4o-2024-08-06``,
``claude-sonnet-4-5-20250929``), vendor prefixes (``anthropic/claude-sonnet-4.5``,
``models/gemini-2.5-pro``, ``us.anthropic.claude-haiku-4-5-20251001-v1:0``) and Ollama tags
(``llama3.1:8b``) all find their entry. Names are compared as sequences of letter and digit
runs, so ``claude-sonnet-4.5``, ``claude-sonnet-4-5`` and ``claude_sonnet_4_5`` are the same
name and ``gpt-4o`` is never mistaken for ``gpt-4``.

The figures are list prices in US dollars per million tokens, as published by the vendors in
late 2025. They were checked where the reference material allowed (vendor model pages and
third-party price tables) and otherwise come from memory; prices change, so treat them as
estimates, never as a bill, and override what you depend on: ``lookup_model(...,
overrides={"gpt-4o": {"input_per_mtok": 2.0}})``, a ``ModelInfo`` or a field dict passed as
``CompactionPolicy(model_info=...)``, or your own ``ModelCatalog``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, Union

from pydantic import Field

from ..types import Usage
from ..types._base import Model

DEFAULT_CONTEXT_WINDOW = 8192
"""The window assumed for a model nobody knows (a conservative fallback)."""

LOCAL_PROVIDERS = frozenset({"ollama"})
"""Providers that run models on the caller's machine: no per-token price."""


class ModelInfo(Model):
    """What treadle knows about one model. Prices are USD per million tokens; ``None`` means
    unknown (the cost stays unknown too). A cache price left ``None`` falls back to the input
    price. ``long_*`` prices apply to every token of a request whose prompt (input, cache
    reads and writes) exceeds ``long_threshold`` (Gemini Pro's and Claude's long-context
    tiers)."""

    name: str
    vendor: str = ""
    context_window: int = Field(default=DEFAULT_CONTEXT_WINDOW, gt=0)
    max_output_tokens: int | None = None
    input_per_mtok: float | None = None
    output_per_mtok: float | None = None
    cache_read_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None
    cache_write_long_per_mtok: float | None = None
    """Cache writes at the long retention (``Usage.cache_write_long``: Anthropic's 1-hour
    cache, twice the input price); ``None`` prices them as other cache writes."""
    long_threshold: int | None = None
    long_input_per_mtok: float | None = None
    long_output_per_mtok: float | None = None
    long_cache_read_per_mtok: float | None = None
    aliases: tuple[str, ...] = ()

    @property
    def priced(self) -> bool:
        return self.input_per_mtok is not None and self.output_per_mtok is not None

    def merged(self, changes: Mapping[str, Any]) -> ModelInfo:
        """A copy with ``changes`` (field names to values) applied and validated."""
        return ModelInfo.model_validate({**self.model_dump(), **dict(changes)})


ModelOverride = Union[ModelInfo, Mapping[str, Any]]

# ---- the data ----
# name, vendor, context window, max output, then USD per million tokens: input, output,
# cache read, cache write. Cache writes: Anthropic charges 1.25x input for 5-minute cache
# writes (2x for 1-hour ones: ``cache_write_long_per_mtok``, set for its rows below);
# OpenAI and Gemini charge nothing extra per token (Gemini bills cache storage per
# hour, which is outside this model). Open-weight models list the published weights'
# window and no price: hosts set their own.

_P = Union[float, None]
_ROWS: tuple[tuple[str, str, int, Union[int, None], _P, _P, _P, _P], ...] = (
    # OpenAI
    ("gpt-4o", "openai", 128_000, 16_384, 2.50, 10.00, 1.25, None),
    ("gpt-4o-mini", "openai", 128_000, 16_384, 0.15, 0.60, 0.075, None),
    ("gpt-4.1", "openai", 1_047_576, 32_768, 2.00, 8.00, 0.50, None),
    ("gpt-4.1-mini", "openai", 1_047_576, 32_768, 0.40, 1.60, 0.10, None),
    ("gpt-4.1-nano", "openai", 1_047_576, 32_768, 0.10, 0.40, 0.025, None),
    ("gpt-4-turbo", "openai", 128_000, 4_096, 10.00, 30.00, None, None),
    ("gpt-4", "openai", 8_192, 8_192, 30.00, 60.00, None, None),
    ("gpt-3.5-turbo", "openai", 16_385, 4_096, 0.50, 1.50, None, None),
    ("o1", "openai", 200_000, 100_000, 15.00, 60.00, 7.50, None),
    ("o1-mini", "openai", 128_000, 65_536, 1.10, 4.40, 0.55, None),
    ("o1-pro", "openai", 200_000, 100_000, 150.00, 600.00, None, None),
    ("o3", "openai", 200_000, 100_000, 2.00, 8.00, 0.50, None),
    ("o3-mini", "openai", 200_000, 100_000, 1.10, 4.40, 0.55, None),
    ("o3-pro", "openai", 200_000, 100_000, 20.00, 80.00, None, None),
    ("o4-mini", "openai", 200_000, 100_000, 1.10, 4.40, 0.275, None),
    ("gpt-5", "openai", 400_000, 128_000, 1.25, 10.00, 0.125, None),
    ("gpt-5-mini", "openai", 400_000, 128_000, 0.25, 2.00, 0.025, None),
    ("gpt-5-nano", "openai", 400_000, 128_000, 0.05, 0.40, 0.005, None),
    ("gpt-5-pro", "openai", 400_000, 272_000, 15.00, 120.00, None, None),
    ("gpt-5-chat", "openai", 128_000, 16_384, 1.25, 10.00, 0.125, None),
    ("gpt-5.1", "openai", 400_000, 128_000, 1.25, 10.00, 0.125, None),
    ("gpt-5.1-codex-mini", "openai", 400_000, 128_000, 0.25, 2.00, 0.025, None),
    ("gpt-5.2", "openai", 400_000, 128_000, 1.75, 14.00, 0.175, None),
    ("gpt-oss-120b", "openai", 131_072, 131_072, None, None, None, None),
    ("gpt-oss-20b", "openai", 131_072, 131_072, None, None, None, None),
    # Anthropic
    ("claude-opus-4-5", "anthropic", 200_000, 64_000, 5.00, 25.00, 0.50, 6.25),
    ("claude-opus-4-1", "anthropic", 200_000, 32_000, 15.00, 75.00, 1.50, 18.75),
    ("claude-opus-4", "anthropic", 200_000, 32_000, 15.00, 75.00, 1.50, 18.75),
    ("claude-sonnet-4-5", "anthropic", 200_000, 64_000, 3.00, 15.00, 0.30, 3.75),
    ("claude-sonnet-4", "anthropic", 200_000, 64_000, 3.00, 15.00, 0.30, 3.75),
    ("claude-3-7-sonnet", "anthropic", 200_000, 64_000, 3.00, 15.00, 0.30, 3.75),
    ("claude-3-5-sonnet", "anthropic", 200_000, 8_192, 3.00, 15.00, 0.30, 3.75),
    ("claude-haiku-4-5", "anthropic", 200_000, 64_000, 1.00, 5.00, 0.10, 1.25),
    ("claude-3-5-haiku", "anthropic", 200_000, 8_192, 0.80, 4.00, 0.08, 1.00),
    ("claude-3-opus", "anthropic", 200_000, 4_096, 15.00, 75.00, 1.50, 18.75),
    ("claude-3-haiku", "anthropic", 200_000, 4_096, 0.25, 1.25, 0.03, 0.30),
    # Google Gemini
    ("gemini-3-pro", "google", 1_048_576, 65_536, 2.00, 12.00, 0.20, None),
    ("gemini-3-flash", "google", 1_048_576, 65_536, 0.50, 3.00, 0.05, None),
    ("gemini-2.5-pro", "google", 1_048_576, 65_536, 1.25, 10.00, 0.125, None),
    ("gemini-2.5-flash", "google", 1_048_576, 65_536, 0.30, 2.50, 0.03, None),
    ("gemini-2.5-flash-lite", "google", 1_048_576, 65_536, 0.10, 0.40, 0.01, None),
    ("gemini-2.0-flash", "google", 1_048_576, 8_192, 0.10, 0.40, 0.025, None),
    ("gemini-2.0-flash-lite", "google", 1_048_576, 8_192, 0.075, 0.30, None, None),
    ("gemini-1.5-pro", "google", 2_097_152, 8_192, 1.25, 5.00, None, None),
    ("gemini-1.5-flash", "google", 1_048_576, 8_192, 0.075, 0.30, None, None),
    # open-weight models
    ("llama-3", "meta", 8_192, None, None, None, None, None),
    ("llama-3.1", "meta", 131_072, None, None, None, None, None),
    ("llama-3.2", "meta", 131_072, None, None, None, None, None),
    ("llama-3.3", "meta", 131_072, None, None, None, None, None),
    ("qwen2.5", "alibaba", 32_768, 8_192, None, None, None, None),
    ("qwen2.5-coder", "alibaba", 32_768, 8_192, None, None, None, None),
    ("qwen3", "alibaba", 40_960, 32_768, None, None, None, None),
    ("qwen3-coder", "alibaba", 262_144, 65_536, None, None, None, None),
    ("qwq", "alibaba", 131_072, 32_768, None, None, None, None),
    ("gemma3", "google", 131_072, 8_192, None, None, None, None),
    ("mistral", "mistral", 32_768, None, None, None, None, None),
    ("mixtral", "mistral", 32_768, None, None, None, None, None),
    ("devstral", "mistral", 131_072, None, None, None, None, None),
    ("deepseek-v3", "deepseek", 131_072, None, None, None, None, None),
    ("deepseek-r1", "deepseek", 131_072, None, None, None, None, None),
    ("deepseek-coder-v2", "deepseek", 163_840, None, None, None, None, None),
    # Mistral's API (list prices of its -latest models)
    ("mistral-nemo", "mistral", 131_072, None, 0.15, 0.15, None, None),
    ("mistral-small", "mistral", 131_072, None, 0.10, 0.30, None, None),
    ("mistral-medium", "mistral", 131_072, None, 0.40, 2.00, None, None),
    ("mistral-large", "mistral", 131_072, None, 2.00, 6.00, None, None),
    ("codestral", "mistral", 262_144, None, 0.30, 0.90, None, None),
    # DeepSeek's API (V3.2 prices; cache read is its "cache hit" input price)
    ("deepseek-chat", "deepseek", 128_000, 8_192, 0.28, 0.42, 0.028, None),
    ("deepseek-reasoner", "deepseek", 128_000, 65_536, 0.28, 0.42, 0.028, None),
)

_ALIASES: dict[str, tuple[str, ...]] = {
    "gpt-4o": ("chatgpt-4o",),
    "claude-opus-4": ("claude-4-opus",),
    "claude-sonnet-4": ("claude-4-sonnet",),
}

# Long-context tiers: threshold (prompt tokens), then input, output and cache-read prices
# that apply to the whole request above it. Sonnet 4 / 4.5 reach that tier through the
# 1M-token beta window.
_LONG: dict[str, tuple[int, float, float, float]] = {
    "claude-sonnet-4-5": (200_000, 6.00, 22.50, 0.60),
    "claude-sonnet-4": (200_000, 6.00, 22.50, 0.60),
    "gemini-3-pro": (200_000, 4.00, 18.00, 0.40),
    "gemini-2.5-pro": (200_000, 2.50, 15.00, 0.25),
}

# ---- matching ----

_RUN = re.compile(r"[a-z]+|[0-9]+")


def name_key(name: str) -> tuple[str, ...]:
    """A model name as its runs of letters and digits: ``"Claude-Sonnet-4.5"`` and
    ``"claude_sonnet_4_5"`` both give ``("claude", "sonnet", "4", "5")``."""
    return tuple(_RUN.findall(name.lower()))


def _find_run(haystack: tuple[str, ...], needle: tuple[str, ...]) -> bool:
    n = len(needle)
    return any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


class ModelCatalog:
    """An immutable set of :class:`ModelInfo` entries with name matching.

    ``find`` tries, in order: an exact name or alias; the longest entry whose name is a
    prefix of the model's (dated snapshots, tags); the longest entry whose name appears
    inside the model's (vendor or host prefixes). ``with_models`` returns a new catalog with
    entries added or replaced, so catalogs can differ per agent without global state.
    """

    __slots__ = ("_entries", "_exact", "_found", "_keys")

    def __init__(self, entries: Iterable[ModelInfo]) -> None:
        self._entries: tuple[ModelInfo, ...] = tuple(entries)
        self._exact: dict[tuple[str, ...], ModelInfo] = {}
        self._found: dict[str, ModelInfo | None] = {}  # memo: a model is looked up per run
        keys: list[tuple[tuple[str, ...], ModelInfo]] = []
        for info in self._entries:
            for spelling in (info.name, *info.aliases):
                key = name_key(spelling)
                if key:
                    self._exact[key] = info
                    keys.append((key, info))
        keys.sort(key=lambda item: len(item[0]), reverse=True)  # longest match first
        self._keys = tuple(keys)

    def __iter__(self) -> Any:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def with_models(self, *infos: ModelInfo) -> ModelCatalog:
        """This catalog plus ``infos`` (an entry with the same name is replaced)."""
        names = {name_key(i.name) for i in infos}
        kept = [e for e in self._entries if name_key(e.name) not in names]
        return ModelCatalog([*kept, *infos])

    def find(self, model: str) -> ModelInfo | None:
        """The entry for ``model``, or ``None`` when nothing matches."""
        try:
            return self._found[model]
        except KeyError:
            pass
        found = self._found[model] = self._search(model)
        return found

    def _search(self, model: str) -> ModelInfo | None:
        key = name_key(model)
        if not key:
            return None
        exact = self._exact.get(key)
        if exact is not None:
            return exact
        for entry_key, info in self._keys:
            if key[: len(entry_key)] == entry_key:
                return info
        for entry_key, info in self._keys:
            if _find_run(key, entry_key):
                return info
        return None


@lru_cache(maxsize=1)
def default_catalog() -> ModelCatalog:
    """The built-in catalog (built on first use, so importing treadle stays fast)."""
    infos = []
    for name, vendor, window, max_out, inp, out, read, write in _ROWS:
        long = _LONG.get(name)
        infos.append(
            ModelInfo.model_construct(  # trusted data: skip validation (first use stays fast)
                name=name,
                vendor=vendor,
                context_window=window,
                max_output_tokens=max_out,
                input_per_mtok=inp,
                output_per_mtok=out,
                cache_read_per_mtok=read,
                cache_write_per_mtok=write,
                cache_write_long_per_mtok=2 * inp if vendor == "anthropic" and inp else None,
                long_threshold=long[0] if long else None,
                long_input_per_mtok=long[1] if long else None,
                long_output_per_mtok=long[2] if long else None,
                long_cache_read_per_mtok=long[3] if long else None,
                aliases=_ALIASES.get(name, ()),
            )
        )
    return ModelCatalog(infos)


def _as_info(model: str, value: ModelOverride, base: ModelInfo | None) -> ModelInfo:
    if isinstance(value, ModelInfo):
        return value
    if base is not None:
        return base.merged(value)
    return ModelInfo.model_validate({"name": model, **dict(value)})


def lookup_model(
    model: str,
    provider: str | None = None,
    *,
    override: ModelOverride | None = None,
    overrides: Mapping[str, ModelOverride] | None = None,
    catalog: ModelCatalog | None = None,
) -> ModelInfo | None:
    """What is known about ``model`` as served by ``provider``.

    ``override`` (a :class:`ModelInfo`, or a dict of fields laid over the catalog's entry)
    wins; ``overrides`` maps model names (matched like the catalog) to the same. A model run
    by a local provider (``ollama``) costs nothing per token. ``None`` when the model is
    unknown and no override describes it.
    """
    cat = catalog if catalog is not None else default_catalog()
    info = cat.find(model)
    if overrides:
        chosen = ModelCatalog(
            [ModelInfo(name=name) for name in overrides]  # only for matching the names
        ).find(model)
        if chosen is not None:
            info = _as_info(model, overrides[chosen.name], info)
    if override is not None:
        info = _as_info(model, override, info)
    if info is not None and provider in LOCAL_PROVIDERS:
        info = info.merged(
            {
                "input_per_mtok": 0.0,
                "output_per_mtok": 0.0,
                "cache_read_per_mtok": 0.0,
                "cache_write_per_mtok": 0.0,
                "cache_write_long_per_mtok": 0.0,
                "long_threshold": None,
            }
        )
    return info


def context_window_for(
    model: str,
    provider: str | None = None,
    *,
    override: ModelOverride | None = None,
    catalog: ModelCatalog | None = None,
) -> int:
    """The model's context window, or :data:`DEFAULT_CONTEXT_WINDOW` when unknown."""
    info = lookup_model(model, provider, override=override, catalog=catalog)
    return info.context_window if info is not None else DEFAULT_CONTEXT_WINDOW


def cost_usd(usage: Usage, info: ModelInfo | None) -> float | None:
    """What ``usage`` costs at ``info``'s prices; ``None`` when the prices are unknown.

    ``usage.input`` excludes cached prompt tokens, which are priced at the cache-read and
    cache-write prices (the input price when those are unknown). Reasoning tokens are part
    of ``output``.
    """
    if info is None or not info.priced:
        return None
    assert info.input_per_mtok is not None and info.output_per_mtok is not None
    inp, out = info.input_per_mtok, info.output_per_mtok
    read = info.cache_read_per_mtok if info.cache_read_per_mtok is not None else inp
    write = info.cache_write_per_mtok if info.cache_write_per_mtok is not None else inp
    long_write = info.cache_write_long_per_mtok
    long_write = long_write if long_write is not None else write
    prompt = usage.input + usage.cache_read + usage.cache_write
    if info.long_threshold is not None and prompt > info.long_threshold:
        scale_in = (info.long_input_per_mtok or inp) / inp if inp else 1.0
        inp = info.long_input_per_mtok or inp
        out = info.long_output_per_mtok or out
        read = info.long_cache_read_per_mtok or read * scale_in
        write = write * scale_in
        long_write = long_write * scale_in
    long_writes = min(usage.cache_write_long, usage.cache_write)
    total = usage.input * inp + usage.output * out
    total += usage.cache_read * read + (usage.cache_write - long_writes) * write
    total += long_writes * long_write
    return total / 1_000_000


def with_cost(usage: Usage, info: ModelInfo | None) -> Usage:
    """``usage`` with ``cost_usd`` filled from ``info`` when the provider did not report it
    (the same object when there is nothing to fill)."""
    if usage.cost_usd is not None:
        return usage
    cost = cost_usd(usage, info)
    if cost is None:
        return usage
    return usage.model_copy(update={"cost_usd": cost})


__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "LOCAL_PROVIDERS",
    "ModelCatalog",
    "ModelInfo",
    "ModelOverride",
    "context_window_for",
    "cost_usd",
    "default_catalog",
    "lookup_model",
    "name_key",
    "with_cost",
]

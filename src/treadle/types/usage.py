"""Token usage and cost."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import model_validator

from ._base import Model, trusted

_COUNTS = (
    "input",
    "output",
    "reasoning",
    "cache_read",
    "cache_write",
    "cache_write_long",
    "total_tokens",
)

_ZERO = {name: 0 for name in _COUNTS} | {"cost_usd": None}

StopReason = Literal["stop", "length", "tool_use", "error", "aborted"]
"""Why an assistant message ended."""


class Usage(Model):
    """Tokens one model call (or a sum of calls) used.

    ``input`` counts prompt tokens not read from or written to the provider's cache;
    ``cache_read`` and ``cache_write`` count those that were. ``reasoning`` is the part of
    ``output`` spent on thinking, ``cache_write_long`` the part of ``cache_write`` written
    at the long retention (Anthropic's 1-hour cache, priced apart). ``total_tokens`` is
    everything the call processed.
    """

    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_long: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None

    def __init__(self, **data: Any) -> None:
        if data:
            super().__init__(**data)
        else:  # all zero: nothing to check (a turn makes a few of these)
            self.__dict__.update(_ZERO)
            object.__setattr__(self, "__pydantic_fields_set__", set())
            object.__setattr__(self, "__pydantic_extra__", None)
            object.__setattr__(self, "__pydantic_private__", None)

    @model_validator(mode="before")
    @classmethod
    def _sane(cls, data: Any) -> Any:
        """What a provider reports is cleaned before it can disable a limit: negative, NaN or
        infinite counts are 0, a negative, NaN or infinite cost is unknown (``None``), and
        ``total_tokens`` is never less than the parts it sums."""
        if not isinstance(data, dict):
            return data
        clean = dict(data)
        for name in _COUNTS:
            value = clean.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                clean[name] = int(value) if math.isfinite(value) and value > 0 else 0
        cost = clean.get("cost_usd")
        if isinstance(cost, (int, float)) and not (math.isfinite(cost) and cost >= 0):
            clean["cost_usd"] = None
        parts = sum(
            clean.get(n, 0)
            for n in ("input", "output", "cache_read", "cache_write")
            if isinstance(clean.get(n, 0), int)
        )
        total = clean.get("total_tokens", 0)
        if isinstance(total, int) and total < parts:
            clean["total_tokens"] = parts
        return clean

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        values = {
            "input": self.input + other.input,
            "output": self.output + other.output,
            "reasoning": self.reasoning + other.reasoning,
            "cache_read": self.cache_read + other.cache_read,
            "cache_write": self.cache_write + other.cache_write,
            "cache_write_long": self.cache_write_long + other.cache_write_long,
            "total_tokens": self.total_tokens + other.total_tokens,
            "cost_usd": cost,
        }
        return trusted(Usage, values, set(values))

    @property
    def context_tokens(self) -> int:
        """Tokens the call put in the context window (prompt, cached prompt, output)."""
        counted = self.input + self.output + self.cache_read + self.cache_write
        return max(counted, self.total_tokens)


class ErrorInfo(Model):
    """What went wrong, on an assistant message with ``stop_reason="error"`` or an ``agent_end``."""

    kind: str
    message: str
    status_code: int | None = None
    traceback: str | None = None
    """For a failure that is a bug (kinds ``provider_bug``, ``hook``, ``tool``): the
    exception's traceback as Python prints it, its causes included, scrubbed of
    credentials (URL passwords, secret query values, bearer tokens, values named like a
    key) and cut to its last 20,000 characters. ``None`` for an expected failure (a
    provider's HTTP error, a limit)."""

"""Context management: transcript validation and repair, the model catalog, token
estimates and compaction.

Only the transcript rules load with ``import treadle``; the catalog, the token counter and
compaction load on first use of one of their names (importing treadle stays fast).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .transcript import (
    MISSING_RESULT_TEXT,
    TranscriptIssue,
    repair_transcript,
    validate_transcript,
)

if TYPE_CHECKING:
    from .catalog import (
        DEFAULT_CONTEXT_WINDOW,
        ModelCatalog,
        ModelInfo,
        context_window_for,
        cost_usd,
        default_catalog,
        lookup_model,
        with_cost,
    )
    from .compacting import CompactionResult, compact
    from .compaction import (
        CompactionJob,
        CompactionPolicy,
        CompactionStrategy,
        Summarize,
        TrimToolOutputs,
        TruncateOldest,
        message_groups,
    )
    from .tokens import (
        ContextEstimate,
        ContextTracker,
        TokenCounter,
        count_tokens,
        estimate_tokens,
    )

_LAZY = {
    "catalog": (
        "DEFAULT_CONTEXT_WINDOW",
        "ModelCatalog",
        "ModelInfo",
        "context_window_for",
        "cost_usd",
        "default_catalog",
        "lookup_model",
        "with_cost",
    ),
    "compacting": ("CompactionResult", "compact"),
    "compaction": (
        "CompactionJob",
        "CompactionPolicy",
        "CompactionStrategy",
        "Summarize",
        "TrimToolOutputs",
        "TruncateOldest",
        "message_groups",
    ),
    "tokens": (
        "ContextEstimate",
        "ContextTracker",
        "TokenCounter",
        "count_tokens",
        "estimate_tokens",
    ),
}
_WHERE = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})


__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "MISSING_RESULT_TEXT",
    "CompactionJob",
    "CompactionPolicy",
    "CompactionResult",
    "CompactionStrategy",
    "ContextEstimate",
    "ContextTracker",
    "ModelCatalog",
    "ModelInfo",
    "Summarize",
    "TokenCounter",
    "TranscriptIssue",
    "TrimToolOutputs",
    "TruncateOldest",
    "compact",
    "context_window_for",
    "cost_usd",
    "count_tokens",
    "default_catalog",
    "estimate_tokens",
    "lookup_model",
    "message_groups",
    "repair_transcript",
    "validate_transcript",
    "with_cost",
]

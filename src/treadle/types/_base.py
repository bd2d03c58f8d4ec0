"""Shared model configuration and small helpers for the data vocabulary."""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict


def now_ms() -> int:
    """Current time as integer unix milliseconds (UTC)."""
    return time.time_ns() // 1_000_000


class Model(BaseModel):
    """Base for every public data type: strict about unknown fields, lazy to build.

    ``defer_build`` keeps ``import treadle`` fast: validators are compiled on first use.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

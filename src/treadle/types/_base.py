"""Shared model configuration and small helpers for the data vocabulary."""

from __future__ import annotations

import time
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict


def now_ms() -> int:
    """Current time as integer unix milliseconds (UTC)."""
    return time.time_ns() // 1_000_000


class Model(BaseModel):
    """Base for every public data type: strict about unknown fields, lazy to build.

    ``defer_build`` keeps ``import treadle`` fast: validators are compiled on first use.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)


_M = TypeVar("_M", bound=BaseModel)
_new = object.__new__
_set = object.__setattr__


def trusted(
    cls: type[_M],
    values: dict[str, Any],
    fields_set: set[str],
    private: dict[str, Any] | None = None,
) -> _M:
    """An instance of ``cls`` holding ``values`` (every field, already valid) without
    running validation: for the per-delta hot path, where a validator costs more than the
    work around it. ``fields_set`` is what the same keyword construction would have set;
    ``private`` the private attributes, for a model that has some."""
    model = _new(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", fields_set)
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", private)
    return model


def replaced(model: _M, key: str, value: Any) -> _M:
    """``model`` with one field replaced, without validation (``value`` is already valid):
    the hot path's substitute for ``model_copy(update={key: value})``."""
    values = model.__dict__.copy()
    values[key] = value
    return trusted(type(model), values, model.__pydantic_fields_set__.copy())

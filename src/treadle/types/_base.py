"""Shared model configuration and small helpers for the data vocabulary."""

from __future__ import annotations

import time
import weakref
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


class _Ref(weakref.ref):  # type: ignore[type-arg]
    __slots__ = ("key",)
    key: int


_watched: dict[int, _Ref] = {}
_edits = 0


def _forget(ref: _Ref) -> None:
    if _watched.get(ref.key) is ref:
        del _watched[ref.key]


def watch(model: Any) -> None:
    """Count assignments to ``model``'s attributes from now on (see :func:`edit_count`).

    Caches that keep something derived from messages (their wire JSON, a repaired view)
    watch the messages and their blocks: while :func:`edit_count` stays the same, no watched
    object had an attribute assigned, so the cache need not compare fields. What assignment
    does not show (an edit inside a list or a dict) the caches check themselves."""
    key = id(model)
    found = _watched.get(key)
    if found is not None and found() is model:
        return
    ref = _Ref(model, _forget)
    ref.key = key
    _watched[key] = ref


def edit_count() -> int:
    """How many attribute assignments watched objects have had (it only grows)."""
    return _edits


class Watched(Model):
    """A model whose attribute assignments bump :func:`edit_count` once it is watched:
    messages and content blocks, the values caches keep derived data for."""

    def __setattr__(self, name: str, value: Any) -> None:
        if id(self) in _watched:
            global _edits
            _edits += 1
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if id(self) in _watched:
            global _edits
            _edits += 1
        super().__delattr__(name)


_M = TypeVar("_M", bound=BaseModel)
_new = object.__new__
_set = object.__setattr__


def trusted(cls: type[_M], values: dict[str, Any], fields_set: set[str]) -> _M:
    """An instance of ``cls`` holding ``values`` (every field, already valid) without
    running validation: for the per-delta hot path, where a validator costs more than the
    work around it. ``fields_set`` is what the same keyword construction would have set."""
    model = _new(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", fields_set)
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


def replaced(model: _M, key: str, value: Any) -> _M:
    """``model`` with one field replaced, without validation (``value`` is already valid):
    the hot path's substitute for ``model_copy(update={key: value})``."""
    values = model.__dict__.copy()
    values[key] = value
    return trusted(type(model), values, model.__pydantic_fields_set__.copy())

"""Change tracking for caches of data derived from messages.

Messages and content blocks are mutable models. A cache that keeps something derived from a
history (its wire JSON, its repaired view) must notice any change, but reading every message
again on every turn is the cost it exists to avoid. So messages and blocks count attribute
assignments once watched (:func:`watch`, :func:`edit_count`), and a :class:`ContentMark`
notes what an assignment does not show — an edit inside a content list, or inside a dict or
list a block holds — in a form checked with pointer comparisons.
"""

from __future__ import annotations

import copy
import weakref
from itertools import chain
from operator import is_
from typing import Any

from ._base import Model


class _Ref(weakref.ref):  # type: ignore[type-arg]
    __slots__ = ("key",)
    key: int


_watched: dict[int, _Ref] = {}
_edits = 0


def _forget(ref: _Ref) -> None:
    if _watched.get(ref.key) is ref:
        del _watched[ref.key]


def watch(model: Any) -> None:
    """Count assignments to ``model``'s attributes from now on (see :func:`edit_count`);
    the registry is weak: it keeps nothing alive."""
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


SHORT_HISTORY = 8
"""Histories with fewer messages are not kept by the caches (the wire cache, the request
view): for them the bookkeeping costs more than doing the work again."""

_ATOMS = frozenset({str, int, float, bool, type(None)})


def copied(value: Any) -> Any:
    """``copy.deepcopy(value)``, several times faster for JSON values (tool arguments)."""
    kind = type(value)
    if kind is dict:
        return {k: copied(v) for k, v in value.items()}
    if kind is list:
        return [copied(v) for v in value]
    return value if kind in _ATOMS else copy.deepcopy(value)


class ContentMark:
    """What a cache needs to tell, without reading them again, that the messages it has seen
    are unchanged: :func:`edit_count` when it looked (no field of a watched message or block
    assigned since), each message's content list with its length and blocks (by identity),
    and — with ``containers`` — a copy of each dict or list a block holds (a tool call's
    arguments, compared by value; a text block's citations aside, never sent to a model).
    That the messages themselves are the same objects, in order, is the caller's to check."""

    __slots__ = ("blocks", "containers", "edits", "kept", "lens", "lists", "track")

    def __init__(self, edits: int, *, containers: bool = True) -> None:
        self.edits = edits
        self.track = containers
        self.lists: list[Any] = []  # each message's content list ...
        self.lens: list[int] = []  # ... its length ...
        self.blocks: list[Any] = []  # ... and its blocks, all in order
        self.containers: list[Any] = []  # dicts and lists blocks hold ...
        self.kept: list[Any] = []  # ... and their copies

    def add(self, message: Any) -> bool:
        """Watch ``message`` and its blocks and note its content. False, noting nothing,
        when it or one of its blocks is not a :class:`Watched` model (an assignment to it
        would go unseen)."""
        if not isinstance(message, Watched):
            return False
        content = message.__dict__.get("content") or ()
        if not all(isinstance(block, Watched) for block in content):
            return False
        watch(message)
        for block in content:
            watch(block)
            if self.track:
                for key, value in block.__dict__.items():
                    # a text block's citations are never sent: no cache derives from them
                    if isinstance(value, (dict, list)) and key != "citations":
                        self.containers.append(value)
                        self.kept.append(copied(value))
        self.lists.append(content)
        self.lens.append(len(content))
        self.blocks.extend(content)
        return True

    def unchanged(self, edits: int) -> bool:
        """Whether the noted messages are as they were (``edits``: :func:`edit_count` now)."""
        lists = self.lists
        if self.edits != edits or list(map(len, lists)) != self.lens:
            return False
        if not all(map(is_, chain.from_iterable(lists), self.blocks)):
            return False
        try:
            return bool(self.containers == self.kept)
        except Exception:  # a container whose == raises
            return False

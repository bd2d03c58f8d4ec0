"""Request bodies built from wire JSON kept per message, so a long history is not
converted and encoded again on every turn.

An adapter encodes each message of a history to its provider's JSON once and keeps the text
in a :class:`WireCache`; a request body is the cached pieces joined (:func:`splice`) and
sent as bytes. Messages are mutable pydantic models, so an entry is served only while the
message is the same object (a weak reference, so the cache never keeps a message alive)
*and* unchanged: each request compares the message's fields, and each content block's
fields, with copies taken when it was encoded. Values compare by identity first, so an
unchanged message costs a few C-level comparisons and no encoding; a reassigned field, a
replaced, appended or removed block, a block's reassigned field or an edit inside a tool
call's arguments (kept as a deep copy) makes that message encode again. What the check does
not see is what never reaches a provider: an edit inside ``details`` or ``usage``.

The check still reads every message of the request, so a turn's cost keeps a small part
that grows with the history (about 1-2 µs a message, mostly memory reads), where encoding
it again cost about 10 µs.
"""

from __future__ import annotations

import copy
import json
import weakref
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, repeat
from operator import attrgetter
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_fields = attrgetter("__dict__")
_deref = weakref.ref.__call__
_get = dict.get
_CONTENT = repeat("content")
_NONE = repeat(())


def _content(fields: dict[str, Any]) -> Any:
    return fields.get("content") or ()


def dumps(value: Any) -> str:
    """``value`` as compact JSON, exactly as httpx encodes ``json=`` bodies."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumpb(value: Any) -> bytes:
    """:func:`dumps` as UTF-8 bytes."""
    return dumps(value).encode()


def _kept(value: Any) -> Any:
    """A field value as the fingerprint keeps it: containers are deep-copied, so an edit
    inside them (``call.arguments["x"] = 1``) no longer compares equal."""
    if isinstance(value, (dict, list)):
        return copy.deepcopy(value)
    return value


def _snapshot(message: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The message's fields (a shallow copy: its content list is checked block by block)
    and each content block's fields (containers deep-copied)."""
    fields = _fields(message)
    content = fields.get("content")
    blocks = content if isinstance(content, list) else ()
    return dict(fields), [{k: _kept(v) for k, v in _fields(b).items()} for b in blocks]


_Entry = tuple["weakref.ref[Any]", dict[str, Any], list[dict[str, Any]], T]
"""A kept message: a weak reference to it, its fields, its blocks' fields, its encoding."""


class WireCache(Generic[T]):
    """Encoded messages by object, for one adapter (see the module docs).

    ``settings(key)`` names the adapter settings the encoding depends on; when they change
    between calls, every entry is dropped.
    """

    __slots__ = ("__weakref__", "_entries", "_key")

    def __init__(self) -> None:
        self._entries: dict[int, _Entry[T]] = {}
        self._key: Any = None

    def __len__(self) -> int:
        return len(self._entries)

    def settings(self, key: Any) -> None:
        """Drop every entry when the adapter settings ``key`` differ from the last call's."""
        if key != self._key:
            self._entries.clear()
            self._key = key

    def encode_all(self, messages: Sequence[Any], encode: Callable[[Any], T]) -> list[T]:
        """``[encode(m) for m in messages]``, each from the cache while that message is
        the same object with the same fields (and blocks with the same fields).

        The messages cached already (usually all but the last few) are checked together,
        with C-level comparisons only; any difference falls back to one by one."""
        entries = self._entries
        found = list(map(entries.get, map(id, messages)))
        known = found.index(None) if None in found else len(found)
        if known:
            head = messages[:known] if isinstance(messages, list) else list(messages[:known])
            refs, kept, blocks, values = zip(*found[:known], strict=True)
            live = list(map(_fields, head))
            try:
                same = (
                    list(map(_deref, refs)) == head
                    and live == list(kept)
                    and list(map(_fields, chain.from_iterable(map(_get, live, _CONTENT, _NONE))))
                    == list(chain.from_iterable(blocks))
                )
            except Exception:  # a field whose == raises (an array in ``details``...)
                same = False
            if same:
                out = list(values)
                out.extend(self._one_by_one(messages[known:], encode))
                return out
        return self._one_by_one(messages, encode)

    def _one_by_one(self, messages: Iterable[Any], encode: Callable[[Any], T]) -> list[T]:
        entries = self._entries
        out: list[T] = []
        for message in messages:
            found = entries.get(id(message))
            if found is not None:
                ref, kept, blocks, value = found
                current = _fields(message)
                try:
                    same = (
                        ref() is message
                        and current == kept
                        and list(map(_fields, _content(current))) == blocks
                    )
                except Exception:
                    same = False
                if same:
                    out.append(value)
                    continue
            out.append(self._fill(message, encode))
        return out

    def _fill(self, message: Any, encode: Callable[[Any], T]) -> T:
        value = encode(message)
        try:
            kept, blocks = _snapshot(message)
            key = id(message)
            ref = weakref.ref(message, _dropper(self._entries, key))
        except (AttributeError, TypeError):
            return value  # not a pydantic model, or not weak-referenceable: not kept
        self._entries[key] = (ref, kept, blocks, value)
        return value


def _dropper(entries: dict[int, _Entry[Any]], key: int) -> Callable[[weakref.ref[Any]], None]:
    def drop(ref: weakref.ref[Any]) -> None:
        found = entries.get(key)
        if found is not None and found[0] is ref:
            del entries[key]

    return drop


def splice(head: dict[str, Any], field: str, items: Sequence[bytes], tail: dict[str, Any]) -> bytes:
    """The JSON object ``{**head, field: [items...], **tail}`` as bytes, keys in that
    order, with ``items`` already encoded (``field`` must be in neither dict). The items are
    copied once, into the result."""
    start = dumps(head)[:-1] + ("," if head else "") + json.dumps(field) + ":["
    rest = dumps(tail)
    end = "]" + ("," + rest[1:] if rest != "{}" else "}")
    if not items:
        return (start + end).encode()
    pieces = list(items)
    pieces[0] = start.encode() + pieces[0]
    pieces[-1] = pieces[-1] + end.encode()
    return b",".join(pieces)

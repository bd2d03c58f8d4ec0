"""Request bodies from the wire JSON kept per message (docs/providers.md#openaichat)."""

from __future__ import annotations

import copy
import json
import re
import secrets
import weakref
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, islice, repeat
from operator import attrgetter, is_
from typing import Any, Generic, TypeVar, cast

from ..types._watch import SHORT_HISTORY, ContentMark, copied, edit_count

T = TypeVar("T")

_fields = attrgetter("__dict__")
_deref = weakref.ref.__call__
_get = dict.get
_CONTENT = repeat("content")
_NONE = repeat(())


# One encoder for every call: ``json.dumps`` with these options builds a new one each time.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def dumps(value: Any) -> str:
    """``value`` as compact JSON, exactly as httpx encodes ``json=`` bodies."""
    return _encode(value)


def dumpb(value: Any) -> bytes:
    """:func:`dumps` as UTF-8 bytes."""
    return dumps(value).encode()


class Pieces(tuple[bytes | str, ...]):
    """One value's JSON in parts: bytes, and the long strings it holds (files' base64) by
    reference, encoded only into the body being built. A message kept in a wire cache then
    holds no copy of its files: they stay the one string their blocks share."""

    __slots__ = ()

    def join(self) -> bytes:
        return b"".join(p.encode() if isinstance(p, str) else p for p in self)


Encoded = bytes | Pieces
"""One kept encoding: plain JSON bytes, or :class:`Pieces`."""

_NONCE = secrets.token_hex(8)  # a placeholder no text can contain by chance
_OPEN, _CLOSE = f"\ue000{_NONCE}:".encode(), "\ue001".encode()
_HOLE = re.compile(re.escape(_OPEN) + rb"(\d+)" + re.escape(_CLOSE))


def hole(strings: list[str], value: str) -> str:
    """A placeholder for ``value`` inside a value :func:`dumpb_sharing` encodes: the JSON
    keeps a reference to ``value`` there instead of a copy (ASCII strings only, such as
    base64, whose JSON is the string itself)."""
    strings.append(value)
    return f"\ue000{_NONCE}:{len(strings) - 1}\ue001"


def dumpb_sharing(value: Any, strings: list[str]) -> Encoded:
    """:func:`dumpb`, with the :func:`hole` placeholders in ``value`` filled by reference."""
    encoded = dumpb(value)
    if not strings:
        return encoded
    parts = _HOLE.split(encoded)  # text, index, text, index, ..., text
    out: list[bytes | str] = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(strings[int(part)])
        elif part:
            out.append(part)
    return Pieces(out)


def joined(items: Iterable[Encoded], start: bytes, separator: bytes, end: bytes) -> Encoded:
    """``start + separator.join(items) + end``, :class:`Pieces` when an item is."""
    values = list(items)
    if not any(type(v) is Pieces for v in values):
        return start + separator.join(cast("list[bytes]", values)) + end
    out: list[bytes | str] = [start]
    for i, value in enumerate(values):
        if i:
            out.append(separator)
        if isinstance(value, Pieces):
            out.extend(value)
        else:
            out.append(value)
    out.append(end)
    return Pieces(out)


def _snapshot(message: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The message's fields (a shallow copy) and each block's fields, containers deep-copied so
    an edit inside (``call.arguments["x"] = 1``) no longer compares equal."""
    fields = _fields(message)
    content = fields.get("content")
    blocks = [_fields(b) for b in content] if isinstance(content, list) else []
    return dict(fields), [
        {k: copied(v) if isinstance(v, (dict, list)) else v for k, v in b.items()} for b in blocks
    ]


_Entry = tuple["weakref.ref[Any]", dict[str, Any], list[dict[str, Any]], T]
"""A kept message: a weak reference to it, its fields, its blocks' fields, its encoding."""


class _Prefix:
    """The messages of one history as last served, with their encodings, checked as a whole
    next time (the same objects, unchanged: ``ContentMark``); keyed weakly by the first."""

    __slots__ = ("mark", "rest", "values")

    def __init__(self, edits: int) -> None:
        self.rest: list[Any] = []  # the messages after the first
        self.values: list[Any] = []
        self.mark = ContentMark(edits)

    def valid(self, messages: list[Any], edits: int) -> int:
        """How many leading messages this prefix covers unchanged (all, or 0); the first
        message is known to be the prefix's."""
        k = len(self.values)
        if k > len(messages) or not all(map(is_, islice(messages, 1, k), self.rest)):
            return 0
        return k if self.mark.unchanged(edits) else 0

    def extend(
        self, messages: Iterable[Any], values: Iterable[Any], entries: dict[int, Any], edits: int
    ) -> None:
        """Cover ``messages`` (just encoded or checked, so their entries are current) too;
        stops at the first one that cannot be covered (not kept, or not watched)."""
        self.mark.edits = edits
        for message, value in zip(messages, values, strict=False):
            entry = entries.get(id(message))
            if entry is None or entry[0]() is not message or not self.mark.add(message):
                return
            if self.values:
                self.rest.append(message)
            self.values.append(value)


class WireCache(Generic[T]):
    """Encoded messages by object, for one adapter (docs/providers.md#openaichat)."""

    __slots__ = ("__weakref__", "_entries", "_key", "_prefixes", "short")

    MAX_HISTORIES = 64
    """How many histories (told apart by their first message) keep a checked prefix."""

    def __init__(self) -> None:
        self._entries: dict[int, _Entry[T]] = {}
        self._key: Any = None
        self._prefixes: dict[int, tuple[weakref.ref[Any], _Prefix]] = {}
        self.short = SHORT_HISTORY  # fewer messages: encoded afresh, never kept

    def __len__(self) -> int:
        return len(self._entries)

    def settings(self, key: Any) -> None:
        """Drop every entry when the adapter settings ``key`` differ from the last call's."""
        if key != self._key:
            self._entries.clear()
            self._prefixes.clear()
            self._key = key

    def encode_all(self, messages: Sequence[Any], encode: Callable[[Any], T]) -> list[T]:
        """``[encode(m) for m in messages]``, from the cache where it may: the prefix served
        last time as a whole, else fields compared in bulk, and on any difference one by one."""
        edits = edit_count()  # read first: an edit made while checking shows next time
        items = messages if isinstance(messages, list) else list(messages)
        if len(items) < self.short:
            return list(map(encode, items))
        if not items:
            return []
        key = id(items[0])
        found = self._prefixes.get(key)
        prefix = found[1] if found is not None and found[0]() is items[0] else None
        k = prefix.valid(items, edits) if prefix is not None else 0
        if prefix is not None and k:
            out = prefix.values[:k]
            out.extend(self._one_by_one(items[k:], encode))
            prefix.extend(items[k:], out[k:], self._entries, edits)
            return out
        out = self._checked(items, encode)
        self._remember(key, items, out, edits)
        return out

    def _remember(self, key: int, items: list[Any], out: list[T], edits: int) -> None:
        prefixes = self._prefixes
        prefixes.pop(key, None)
        try:
            anchor = weakref.ref(items[0], _remover(prefixes, key))
        except TypeError:
            return  # not weak-referenceable: nothing to anchor the prefix to
        prefix = _Prefix(edits)
        prefix.extend(items, out, self._entries, edits)
        if not prefix.values:
            return
        prefixes[key] = (anchor, prefix)
        while len(prefixes) > self.MAX_HISTORIES:
            del prefixes[next(iter(prefixes))]

    def _checked(self, messages: list[Any], encode: Callable[[Any], T]) -> list[T]:
        entries = self._entries
        found = list(map(entries.get, map(id, messages)))
        known = found.index(None) if None in found else len(found)
        if known:
            head = messages[:known]
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
                        and list(map(_fields, current.get("content") or ())) == blocks
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
            ref = weakref.ref(message, _remover(self._entries, key))
        except (AttributeError, TypeError):
            return value  # not a pydantic model, or not weak-referenceable: not kept
        self._entries[key] = (ref, kept, blocks, value)
        return value


def _remover(table: dict[int, Any], key: int) -> Callable[[weakref.ref[Any]], None]:
    """A weak reference's callback: remove ``table[key]`` if that entry is still its own."""

    def remove(ref: weakref.ref[Any]) -> None:
        found = table.get(key)
        if found is not None and found[0] is ref:
            del table[key]

    return remove


def splice(
    head: dict[str, Any],
    field: str,
    items: Sequence[Encoded],
    tail: dict[str, Any],
    last: bytes = b"",
) -> bytes:
    """``{**head, field: [items...], **tail}`` as JSON bytes, ``items`` already encoded (and
    copied once, into the result), then ``last`` (an encoded ``"key":value`` member, or none)."""
    start = dumps(head)[:-1] + ("," if head else "") + json.dumps(field) + ":["
    rest = dumps(tail)
    end = ("]" + ("," + rest[1:] if rest != "{}" else "}")).encode()
    if last:
        end = end[:-1] + b"," + last + b"}"
    if not items:
        return start.encode() + end
    if any(type(item) is Pieces for item in items):  # files kept by reference: fill them in
        body = joined(items, start.encode(), b",", end)
        return body.join() if isinstance(body, Pieces) else body
    pieces = cast("list[bytes]", list(items))
    pieces[0] = start.encode() + pieces[0]
    pieces[-1] = pieces[-1] + end
    return b",".join(pieces)


class ToolsJSON:
    """A request's tools list (``build(specs)``) encoded once while the specs are the same
    objects with equal fields (``tool_spec`` returns the same spec for an unchanged tool)."""

    __slots__ = ("_build", "_encoded", "_kept", "_specs")

    def __init__(self, build: Callable[[Sequence[Any]], Any]) -> None:
        self._build = build
        self._specs: tuple[Any, ...] = ()
        self._kept: list[Any] = []  # name, description and a copy of the parameters, per spec
        self._encoded = b""

    def encode(self, specs: Sequence[Any]) -> bytes:
        specs = tuple(specs)
        kept = [(s.name, s.description, s.parameters) for s in specs]
        try:
            same = len(specs) == len(self._specs) and all(map(is_, specs, self._specs))
            same = same and kept == self._kept
        except Exception:  # parameters whose == raises
            same = False
        if not same:
            self._encoded = dumpb(self._build(specs))
            self._specs = specs
            self._kept = copy.deepcopy(kept)
        return self._encoded

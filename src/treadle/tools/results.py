"""What a tool returned, as a :class:`ToolResult`: one conversion, documented in docs/loop.md.

Text, content blocks and ``ToolResult`` pass through; everything else becomes JSON by the
rules of :func:`jsonable`, and a value with no JSON form is refused with an error saying
what to return instead — never a Python ``repr`` sent as if it were the answer.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from collections.abc import Iterator, Mapping
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum
from pathlib import PurePath
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from ..errors import UsageError
from ..types import FileContent, ImageContent, TextContent, ToolResult

_MAX_DEPTH = 100
_BLOCKS = (TextContent, ImageContent, FileContent)
_PLAIN = frozenset({str, int, bool, type(None)})  # kept as they are, with no path built


def to_tool_result(value: Any) -> ToolResult:
    """Turn whatever a tool returned into a :class:`ToolResult`.

    A ``ToolResult`` is kept; None is an empty result; a string, a content block or a list of
    content blocks (strings among them are text blocks) is the content. A pydantic model is
    its JSON (and ``details`` its dump).
    Anything else is converted by :func:`jsonable` and sent as JSON text — except a value
    that converts to a string (a datetime, an enum of strings, a UUID ...), sent as that
    text. Raises :class:`UsageError` for a value with no JSON form (bytes, an arbitrary
    object, a generator that was not drained: see :func:`drained`).
    """
    if isinstance(value, ToolResult):
        return value
    if inspect.isgenerator(value):  # drained first: it may yield content blocks
        value = list(value)
    if value is None:
        return ToolResult(content=[])
    if isinstance(value, str):
        return ToolResult(content=[TextContent(text=value)])
    if isinstance(value, (TextContent, ImageContent, FileContent)):
        return ToolResult(content=[value])
    if (
        isinstance(value, list)
        and any(isinstance(v, _BLOCKS) for v in value)
        and all(isinstance(v, (str, *_BLOCKS)) for v in value)
    ):  # blocks, and strings between them as text: ["The chart:", image]
        return ToolResult(content=[TextContent(text=v) if isinstance(v, str) else v for v in value])
    if isinstance(value, BaseModel):
        return ToolResult(
            content=[TextContent(text=value.model_dump_json())],
            details=value.model_dump(mode="json"),
        )
    converted = jsonable(value)
    text = converted if isinstance(converted, str) else json.dumps(converted, ensure_ascii=False)
    return ToolResult(content=[TextContent(text=text)])


def jsonable(value: Any, where: str = "the result", depth: int = 0) -> Any:
    """``value`` as plain JSON data (dicts, lists, strings, numbers, booleans, None).

    Dataclasses become objects of their fields and pydantic models their JSON dump; an enum
    becomes its value; ``datetime`` / ``date`` / ``time`` ISO 8601 text and a ``timedelta``
    its seconds; ``UUID``, ``Decimal`` and paths their text; tuples, lists and other
    iterators lists; sets and frozensets lists, sorted when their items can be compared;
    mappings objects (keys as text); a float that is not finite its text (JSON has no NaN).
    Raises :class:`UsageError` for bytes (decode them, or return
    :class:`~treadle.types.ImageContent` / :class:`~treadle.types.FileContent`) and for any
    other object, naming where it sat.
    """
    if depth > _MAX_DEPTH:
        raise UsageError(f"the result nests more than {_MAX_DEPTH} levels deep")
    if value is None or isinstance(value, (str, bool, int)):
        return value.value if isinstance(value, Enum) else value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Enum):
        return jsonable(value.value, where, depth + 1)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: jsonable(getattr(value, f.name), f"{where}.{f.name}", depth + 1)
            for f in dataclasses.fields(value)
        }
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (UUID, Decimal, PurePath)):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise UsageError(
            f"{where} is {type(value).__name__}, which the model cannot read: decode it to a "
            "str, or return ImageContent for an image or FileContent.from_bytes(...) for a file"
        )
    if isinstance(value, Mapping):
        return {
            _key(k, where): v if type(v) in _PLAIN else jsonable(v, f"{where}[{k!r}]", depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, (set, frozenset)):
        try:
            items = sorted(value)
        except TypeError:  # items that cannot be compared keep the set's order
            items = list(value)
        return [jsonable(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(items)]
    if isinstance(value, (list, tuple, Iterator)) or inspect.isgenerator(value):
        return [
            v if type(v) in _PLAIN else jsonable(v, f"{where}[{i}]", depth + 1)
            for i, v in enumerate(value)
        ]
    if inspect.isasyncgen(value):
        raise UsageError(f"{where} is an async generator, which was not drained: return a list")
    raise UsageError(
        f"{where} is of type {type(value).__name__}, which has no JSON form: return a str, a dict "
        "or list of JSON values, a dataclass or a pydantic model"
    )


def _key(key: Any, where: str) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float, Enum, UUID, date, time)):
        found = jsonable(key, where)
        return found if isinstance(found, str) else json.dumps(found)
    raise UsageError(f"{where} has a key of type {type(key).__name__}: use str keys")


async def drained(value: Any) -> Any:
    """An async generator a tool returned, run to its end into a list (its items are then
    converted like any list); any other value as it is. (A plain generator is drained by
    :func:`jsonable`; a plain ``def`` tool's is drained in its worker thread.)"""
    if inspect.isasyncgen(value):
        return [item async for item in value]
    return value

"""Values compared as JSON data: a pydantic model as its fields, the first place two
values differ, a long text clipped for a reason."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python


def as_json(value: Any) -> Any:
    """A value as plain JSON data (a pydantic model as its dump, a dataclass as a dict)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return to_jsonable_python(value, fallback=str)


def first_difference(expected: Any, got: Any, path: str = "$") -> str | None:
    """Where two JSON values first differ, as ``$.a[1]: 3 expected, 4 got``."""
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in expected:
            if key not in got:
                return f"{path}.{key}: missing"
            found = first_difference(expected[key], got[key], f"{path}.{key}")
            if found:
                return found
        extra = [k for k in got if k not in expected]
        return f"{path}.{extra[0]}: not expected" if extra else None
    if isinstance(expected, list) and isinstance(got, list):
        for i, (e, g) in enumerate(zip(expected, got, strict=False)):
            found = first_difference(e, g, f"{path}[{i}]")
            if found:
                return found
        if len(expected) != len(got):
            return f"{path}: {len(expected)} items expected, {len(got)} got"
        return None
    if expected == got and type(expected) is type(got):
        return None
    if isinstance(expected, (int, float)) and isinstance(got, (int, float)):
        if expected == got and not isinstance(expected, bool) and not isinstance(got, bool):
            return None
    return f"{path}: {clip(json.dumps(expected))} expected, {clip(json.dumps(got))} got"


def clip(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"

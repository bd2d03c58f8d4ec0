"""What goes into and comes out of a tool call: arguments checked against a schema, a
tool's value converted to a result, results bounded, and the texts of calls not run."""

from __future__ import annotations

import inspect
import logging
from typing import Any

from pydantic_core import from_json

from ..errors import UsageError
from ..tools import ToolResult
from ..tools.function_tool import unawaited_error
from ..tools.results import to_tool_result
from ..types import TextContent
from ..types.messages import CANCELLED_TEXT
from ..types.text import clean_text, clip_text

logger = logging.getLogger("treadle.loop")


def json_error(raw: str) -> str:
    try:
        from_json(raw)
    except ValueError as exc:
        return str(exc)
    return "not a JSON object"


def cancelled() -> ToolResult:
    """The result of a call that did not run to its end (marked, not only worded)."""
    return ToolResult(content=[TextContent(text=CANCELLED_TEXT)], is_error=True, cancelled=True)


def describe(exc: BaseException) -> str:
    try:
        return clean_text(f"{type(exc).__name__}: {exc}")
    except Exception:  # an exception whose __str__ fails
        return f"{type(exc).__name__} (its message could not be read)"


def converted(name: str, value: Any) -> ToolResult:
    """What the tool returned as a ToolResult (``tools/results.py``); a value with no JSON
    form is an error result telling the tool's author what to return (and logged: a bug to
    fix), and so is an awaitable (a plain ``def`` that returned a coroutine: ``async``
    forgotten) or a value whose conversion fails."""
    if inspect.isawaitable(value):
        return unawaited(name, value)
    try:
        return to_tool_result(value)
    except UsageError as exc:
        message = (
            f"Tool '{name}' returned a {type(value).__name__} the model cannot be sent: {exc}."
        )
        logger.warning("%s", message)
        return ToolResult.error(message)
    except Exception as exc:
        return ToolResult.error(
            f"Tool '{name}' returned a {type(value).__name__} that could not be turned into "
            f"a result: {describe(exc)}"
        )


def unawaited(name: str, value: Any) -> ToolResult:
    """A tool returned an awaitable instead of its result: an error the model is told and
    the developer sees in the log (``async`` forgotten on a tool's function)."""
    message = str(unawaited_error(name, value))
    logger.warning("%s", message)
    return ToolResult.error(message)


def bounded(result: ToolResult, limit: int | None) -> ToolResult:
    """Text made valid Unicode and, past ``limit`` characters in all, clipped with a marker."""
    texts = [b for b in result.content if isinstance(b, TextContent)]
    if not texts:
        return result
    cleaned = [clean_text(b.text) for b in texts]
    total = sum(len(t) for t in cleaned)
    if all(c is b.text for c, b in zip(cleaned, texts, strict=True)) and (
        limit is None or total <= limit
    ):
        return result
    content: list[Any] = []
    budget = limit if limit is not None else total
    for block in result.content:
        if isinstance(block, TextContent):
            text = clean_text(block.text)
            share = max(0, budget) if limit is not None else len(text)
            clipped = clip_text(text, share) if len(text) > share else text
            budget -= len(text)
            content.append(TextContent(text=clipped))
        else:
            content.append(block)
    return result.model_copy(update={"content": content})


def shape_problem(args: dict[str, Any], schema: Any) -> str:
    """The top-level checks of a tool's JSON schema that need no validator library:
    required properties present, no unknown ones when ``additionalProperties`` is false.
    (Tools other than ``@tool`` functions validate types themselves.)"""
    if not isinstance(schema, dict):
        return ""
    problems: list[str] = []
    required = schema.get("required")
    if isinstance(required, list):
        missing = [name for name in required if isinstance(name, str) and name not in args]
        problems += [f"{name}: Field required" for name in missing]
    properties = schema.get("properties")
    if schema.get("additionalProperties") is False and isinstance(properties, dict):
        problems += [
            f"{name}: Extra inputs are not permitted" for name in args if name not in properties
        ]
    return "; ".join(problems)

"""What goes into and comes out of a tool call: arguments checked against a schema, a
tool's value converted to a result, results bounded, and the texts of calls not run."""

from __future__ import annotations

import inspect
import logging
from typing import Any

import anyio
from pydantic_core import from_json

from .._signals import HookFailed
from ..errors import UsageError
from ..tools import (
    ApprovalRequired,
    TaskComplete,
    Tool,
    ToolArgumentsError,
    ToolContext,
    ToolResult,
    ToolTraits,
)
from ..tools.function_tool import thread_still_running, unawaited_error
from ..tools.results import to_tool_result
from ..types import TextContent
from ..types.messages import CANCELLED_TEXT
from ..types.text import clean_text, clip_text
from .decisions import Allow, Deny

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


WAITING_TEXT = "Waiting for a person's approval"


def waiting(prompt: str | None) -> ToolResult:
    """The end of a call whose tool asked a person mid-call and now waits for the answer
    (not an error: the run suspends on it, and the approved call runs again)."""
    text = f"{WAITING_TEXT}: {prompt}" if prompt else f"{WAITING_TEXT}."
    return ToolResult.of(text, details={"waiting": True})


def read_answer(
    answer: Any, approved: Allow | Deny | None, *, running: bool = False
) -> Allow | Deny:
    """An ``approval_handler``'s answer as a decision (fail closed on anything else).
    ``approved``: the decision an approval keeps (its arguments); ``running``: the call
    asked mid-call, so an answer cannot give it new arguments."""
    if answer is True:
        return approved or Allow()
    if answer is False:
        return Deny()
    if isinstance(answer, Allow) and running and answer.arguments is not None:
        raise HookFailed(
            "approval_handler",
            TypeError(
                f"returned {answer!r} for a tool that asked mid-call: the call is running, "
                "so it cannot take new arguments; return True, False, Allow() or Deny(...)"
            ),
        )
    if isinstance(answer, (Allow, Deny)):
        return answer
    raise HookFailed(
        "approval_handler",
        TypeError(f"returned {answer!r}; return True, False, Allow(...) or Deny(...)"),
    )


async def run_with_retries(
    tool: Tool, traits: ToolTraits, args: dict[str, Any], ctx: ToolContext[Any]
) -> Any:
    """``tool.run``, tried again after an exception when the tool is idempotent and asks for
    retries (0.1 s, doubling); a tool that may have had effects runs once."""
    retries = traits.retries if traits.idempotent else 0
    delay = 0.1
    for attempt in range(retries + 1):
        try:
            return await tool.run(args, ctx)
        except (TaskComplete, ToolArgumentsError, ApprovalRequired):
            raise
        except Exception:
            if attempt == retries or ctx.cancelled:
                raise
        await anyio.sleep(delay)
        delay = min(delay * 2, 5.0)
    raise AssertionError("unreachable")  # pragma: no cover


def timed_out(name: str, timeout: float, ctx: ToolContext[Any]) -> str:
    """The text of a call that timed out: a worker thread (a plain ``def`` tool) cannot be
    stopped, so such a call is said to be abandoned, not cancelled."""
    if thread_still_running(ctx):
        return (
            f"Tool '{name}' timed out after {timeout:g}s. It runs in a worker thread, which "
            "cannot be stopped: it may still be running, and its result will be ignored."
        )
    return f"Tool '{name}' timed out after {timeout:g}s and was cancelled."

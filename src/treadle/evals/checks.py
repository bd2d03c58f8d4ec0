"""Deterministic evaluators: any Python function, the answer's text (exact, contains,
regex), the structured output (equality, a JSON Schema) and bounds on what a sample cost."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..errors import ConfigurationError, MissingExtra, UsageError, install_hint
from .core import EvalContext, Evaluator, Score
from .jsonish import as_json, clip, first_difference

CheckResult = bool | float | Score | tuple[float | bool, str] | None


class Check(Evaluator):
    """Any Python function as an evaluator: ``fn(ctx)`` (sync or async) returns a bool
    (passed or not), a number from 0 to 1 (passed at ``threshold``), a ``(value, reason)``
    pair, or a whole :class:`Score`."""

    def __init__(
        self,
        fn: Callable[[EvalContext], CheckResult | Awaitable[CheckResult]],
        *,
        name: str | None = None,
        threshold: float = 1.0,
    ) -> None:
        if not callable(fn):
            raise UsageError(f"Check needs a function of the sample's EvalContext, got {fn!r}")
        self.fn = fn
        self.name = name or str(getattr(fn, "__name__", "check"))
        self.threshold = threshold

    def __repr__(self) -> str:
        return f"Check({self.name})"

    async def evaluate(self, ctx: EvalContext) -> Score:
        got: Any = self.fn(ctx)
        if inspect.isawaitable(got):
            got = await got
        if isinstance(got, Score):
            return got
        reason = ""
        if isinstance(got, tuple) and len(got) == 2:
            got, reason = got
        if isinstance(got, bool):
            return self.score(1.0 if got else 0.0, str(reason))
        if isinstance(got, (int, float)):
            value = float(got)
            return self.score(value, str(reason), passed=value >= self.threshold)
        raise UsageError(
            f"check {self.name!r} returned {got!r}: return a bool, a number from 0 to 1, "
            "a (value, reason) pair or a Score"
        )


def evaluator(
    fn: Callable[[EvalContext], Any] | None = None,
    *,
    name: str | None = None,
    threshold: float = 1.0,
) -> Any:
    """``@evaluator`` makes a function a :class:`Check` (``@evaluator(threshold=0.5)``
    too)."""
    if fn is None:
        return lambda f: Check(f, name=name, threshold=threshold)
    return Check(fn, name=name, threshold=threshold)


class _Missing:
    def __repr__(self) -> str:
        return "the case's expected_output"


EXPECTED: Any = _Missing()
"""The default of evaluators that compare with something: the case's ``expected_output``."""


def _expected(ctx: EvalContext, given: Any, who: str) -> Any:
    if given is not EXPECTED:
        return given
    if ctx.case.expected_output is None:
        raise ConfigurationError(
            f"{who} compares with the case's expected_output, and case {ctx.case.name!r} "
            "has none: give the case expected_output=... or the evaluator a value"
        )
    return ctx.case.expected_output


class Equals(Evaluator):
    """The answer's text equals ``expected`` (default: the case's ``expected_output``),
    after stripping surrounding white space (``strip=False`` keeps it), optionally ignoring
    case."""

    def __init__(
        self,
        expected: Any = EXPECTED,
        *,
        ignore_case: bool = False,
        strip: bool = True,
        name: str | None = None,
    ) -> None:
        self.expected = expected
        self.ignore_case = ignore_case
        self.strip = strip
        self.name = name or "equals"

    def _norm(self, text: str) -> str:
        text = text.strip() if self.strip else text
        return text.casefold() if self.ignore_case else text

    async def evaluate(self, ctx: EvalContext) -> Score:
        expected = str(_expected(ctx, self.expected, "Equals"))
        if self._norm(ctx.text) == self._norm(expected):
            return self.score(1.0, f"the answer is {clip(expected)!r}")
        return self.score(0.0, f"expected {clip(expected)!r}, got {clip(ctx.text)!r}")


class Contains(Evaluator):
    """The answer's text contains each of ``texts`` (one string or several; default: the
    case's ``expected_output``). The score is the share found; it passes when all are
    found, or with ``any=True`` when one is."""

    def __init__(
        self,
        texts: str | Sequence[str] = EXPECTED,
        *,
        any: bool = False,
        ignore_case: bool = False,
        name: str | None = None,
    ) -> None:
        self.texts = texts
        self.any = any
        self.ignore_case = ignore_case
        self.name = name or "contains"

    async def evaluate(self, ctx: EvalContext) -> Score:
        given = _expected(ctx, self.texts, "Contains")
        wanted = [given] if isinstance(given, str) else [str(t) for t in given]
        if not wanted:
            raise ConfigurationError("Contains needs at least one text to look for")
        text = ctx.text.casefold() if self.ignore_case else ctx.text
        found = [w for w in wanted if (w.casefold() if self.ignore_case else w) in text]
        missing = [w for w in wanted if w not in found]
        value = len(found) / len(wanted)
        if self.any:
            passed = bool(found)
            reason = f"found {found[0]!r}" if found else f"none of {missing!r} in the answer"
            return self.score(1.0 if passed else 0.0, reason, passed=passed)
        reason = f"found {found!r}" if not missing else f"missing {missing!r}"
        return self.score(value, reason, passed=not missing)


class Regex(Evaluator):
    """The answer's text matches ``pattern`` somewhere (``full=True``: as a whole)."""

    def __init__(
        self,
        pattern: str,
        *,
        ignore_case: bool = False,
        full: bool = False,
        name: str | None = None,
    ) -> None:
        try:
            self.pattern = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise ConfigurationError(f"Regex: {pattern!r} is not a valid pattern: {exc}") from None
        self.full = full
        self.name = name or "regex"

    async def evaluate(self, ctx: EvalContext) -> Score:
        text = ctx.text
        match = self.pattern.fullmatch(text) if self.full else self.pattern.search(text)
        if match is not None:
            return self.score(1.0, f"matched {clip(match.group(0))!r}")
        return self.score(0.0, f"no match for /{self.pattern.pattern}/ in {clip(text)!r}")


class OutputEquals(Evaluator):
    """The structured output equals ``expected`` (default: the case's
    ``expected_output``), compared as JSON data: a pydantic model equals the dict of its
    fields. The reason names the first place they differ."""

    def __init__(self, expected: Any = EXPECTED, *, name: str | None = None) -> None:
        self.expected = expected
        self.name = name or "output_equals"

    async def evaluate(self, ctx: EvalContext) -> Score:
        expected = as_json(_expected(ctx, self.expected, "OutputEquals"))
        got = as_json(ctx.output)
        diff = first_difference(expected, got)
        if diff is None:
            return self.score(1.0, "the output is the expected one")
        return self.score(0.0, f"differs at {diff}")


class MatchesSchema(Evaluator):
    """The structured output (or the answer's text read as JSON) fits ``schema``: a
    pydantic model or any type (checked by pydantic, nothing to install), or a JSON Schema
    as a dict (checked by ``jsonschema``: the ``evals`` extra)."""

    def __init__(self, schema: type[Any] | dict[str, Any], *, name: str | None = None) -> None:
        self.schema = schema
        self.name = name or "schema"
        if isinstance(schema, dict):
            self._validator = _json_schema_validator(schema)
        else:
            self._adapter: TypeAdapter[Any] = TypeAdapter(schema)

    async def evaluate(self, ctx: EvalContext) -> Score:
        value = ctx.output
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return self.score(0.0, f"the answer is not JSON: {clip(value)!r}")
        data = as_json(value)
        if isinstance(self.schema, dict):
            errors = sorted(self._validator.iter_errors(data), key=lambda e: list(e.path))
            if not errors:
                return self.score(1.0, "the output fits the schema")
            first = errors[0]
            where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.path)
            return self.score(0.0, f"{where}: {first.message}", errors=len(errors))
        try:
            self._adapter.validate_python(data)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = "$" + "".join(
                f"[{p}]" if isinstance(p, int) else f".{p}" for p in problem["loc"]
            )
            return self.score(0.0, f"{where}: {problem['msg']}", errors=exc.error_count())
        return self.score(1.0, "the output fits the schema")


def _json_schema_validator(schema: dict[str, Any]) -> Any:
    try:
        import jsonschema
    except ImportError:
        raise MissingExtra(
            "MatchesSchema with a JSON Schema dict needs jsonschema: "
            f"{install_hint('evals')} (or give a pydantic model, checked without it)"
        ) from None
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ConfigurationError(f"MatchesSchema: the schema is not valid: {exc.message}") from None
    return cls(schema)


class Bounds(Evaluator):
    """What a sample may spend: cost in US dollars, tokens (all of them), the agent's model
    turns, its tool calls and the time from the first prompt to the last answer. The score
    is the share of the bounds given that held; it passes when all did. A bound on cost
    fails when the cost is unknown (a model missing from the price catalog)."""

    def __init__(
        self,
        *,
        max_cost_usd: float | None = None,
        max_tokens: int | None = None,
        max_turns: int | None = None,
        max_tool_calls: int | None = None,
        max_duration_s: float | None = None,
        name: str | None = None,
    ) -> None:
        self.limits = {
            "cost": max_cost_usd,
            "tokens": max_tokens,
            "turns": max_turns,
            "tool calls": max_tool_calls,
            "duration": max_duration_s,
        }
        if all(v is None for v in self.limits.values()):
            raise ConfigurationError(
                "Bounds needs at least one of max_cost_usd, max_tokens, max_turns, "
                "max_tool_calls, max_duration_s"
            )
        for what, limit in self.limits.items():
            if limit is not None and (not isinstance(limit, (int, float)) or limit < 0):
                raise ConfigurationError(
                    f"Bounds: the {what} bound must be a number >= 0, got {limit!r}"
                )
        self.name = name or "bounds"

    async def evaluate(self, ctx: EvalContext) -> Score:
        usage = ctx.usage
        measured: dict[str, float | None] = {
            "cost": usage.cost_usd,
            "tokens": usage.total_tokens,
            "turns": ctx.turns,
            "tool calls": len(ctx.tool_calls),
            "duration": ctx.duration_s,
        }
        held, notes = 0, []
        given = {k: v for k, v in self.limits.items() if v is not None}
        for what, limit in given.items():
            value = measured[what]
            if value is None:
                notes.append(f"{what} unknown (bound {_fmt(what, limit)})")
                continue
            ok = value <= limit
            held += ok
            notes.append(f"{what} {_fmt(what, value)} {'≤' if ok else '>'} {_fmt(what, limit)}")
        return self.score(held / len(given), "; ".join(notes), passed=held == len(given))


def _fmt(what: str, value: float) -> str:
    if what == "cost":
        return f"${value:.4f}"
    if what == "duration":
        return f"{value:.2f} s"
    return str(int(value))

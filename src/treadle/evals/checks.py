"""Deterministic evaluators: the answer's text (exact, contains, regex), the structured
output (equality, a JSON Schema) and bounds on what a sample cost."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from ..errors import MissingExtra, install_hint
from .scoring import EvalContext, Evaluator, Score


class _Missing:
    def __repr__(self) -> str:
        return "the case's expected_output"


EXPECTED: Any = _Missing()
"""The default of evaluators that compare with something: the case's ``expected_output``."""


def _expected(ctx: EvalContext, given: Any, who: str) -> Any:
    if given is not EXPECTED:
        return given
    if ctx.case.expected_output is None:
        raise ValueError(
            f"{who} compares with the case's expected_output, and case {ctx.case.name!r} "
            "has none: give the case expected_output=... or the evaluator a value"
        )
    return ctx.case.expected_output


def _clip(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


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
            return self.score(1.0, f"the answer is {_clip(expected)!r}")
        return self.score(0.0, f"expected {_clip(expected)!r}, got {_clip(ctx.text)!r}")


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
            raise ValueError("Contains needs at least one text to look for")
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
            raise ValueError(f"Regex: {pattern!r} is not a valid pattern: {exc}") from None
        self.full = full
        self.name = name or "regex"

    async def evaluate(self, ctx: EvalContext) -> Score:
        text = ctx.text
        match = self.pattern.fullmatch(text) if self.full else self.pattern.search(text)
        if match is not None:
            return self.score(1.0, f"matched {_clip(match.group(0))!r}")
        return self.score(0.0, f"no match for /{self.pattern.pattern}/ in {_clip(text)!r}")


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
    return f"{path}: {_clip(json.dumps(expected))} expected, {_clip(json.dumps(got))} got"


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
                return self.score(0.0, f"the answer is not JSON: {_clip(value)!r}")
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
        raise ValueError(f"MatchesSchema: the schema is not valid: {exc.message}") from None
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
            raise ValueError(
                "Bounds needs at least one of max_cost_usd, max_tokens, max_turns, "
                "max_tool_calls, max_duration_s"
            )
        for what, limit in self.limits.items():
            if limit is not None and (not isinstance(limit, (int, float)) or limit < 0):
                raise ValueError(f"Bounds: the {what} bound must be a number >= 0, got {limit!r}")
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

"""Each evaluator on a sample built by hand: its score, whether it passed and its reason."""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel

from treadle import AssistantMessage, TextContent, ToolCall, Usage, UserMessage
from treadle.agent import RunResult
from treadle.evals import (
    Bounds,
    Call,
    Case,
    Check,
    Contains,
    Equals,
    EvalContext,
    Judge,
    MatchesSchema,
    OutputEquals,
    Regex,
    Score,
    Trajectory,
    evaluator,
)
from treadle.evals.judge import parse_verdict
from treadle.testing import ScriptedProvider


class Trip(BaseModel):
    city: str
    days: int


def sample(
    text: str = "",
    *,
    output: Any = None,
    calls: list[ToolCall] | None = None,
    expected: Any = None,
    usage: Usage | None = None,
) -> EvalContext:
    messages: list[Any] = [UserMessage.of("question")]
    if calls:
        messages.append(AssistantMessage(content=list(calls)))
    messages.append(AssistantMessage(content=[TextContent(text=text)] if text else []))
    result: RunResult[Any] = RunResult(messages=messages, output=output, usage=usage or Usage())
    return EvalContext(
        case=Case("c", input="question", expected_output=expected),
        model="m",
        repeat=0,
        inputs=["question"],
        results=[result],
        events=[],
        duration_s=1.5,
        resolve_model=lambda spec: spec,  # type: ignore[arg-type, return-value]
    )


def score(ev: Any, ctx: EvalContext) -> Score:
    result: Score = anyio.run(ev.evaluate, ctx)
    return result


def test_equals_compares_the_text_stripped() -> None:
    assert score(Equals("42"), sample(" 42\n")).passed
    assert score(Equals(), sample("42", expected="42")).passed  # the case's expected output
    miss = score(Equals("Paris"), sample("paris"))
    assert (miss.value, miss.passed, miss.reason) == (0, False, "expected 'Paris', got 'paris'")
    assert score(Equals("Paris", ignore_case=True), sample("paris")).passed
    assert not score(Equals(" 42", strip=False), sample("42")).passed


def test_without_an_expected_output_the_evaluator_says_what_to_give() -> None:
    with pytest.raises(ValueError, match="case 'c' has none: give the case expected_output"):
        score(Contains(), sample("x"))


def test_contains_scores_the_share_found() -> None:
    half = score(Contains(["Paris", "Rome"]), sample("Paris in May"))
    assert (half.value, half.passed, half.reason) == (0.5, False, "missing ['Rome']")
    anyone = score(Contains(["Rome", "Paris"], any=True), sample("Paris in May"))
    assert (anyone.value, anyone.passed, anyone.reason) == (1, True, "found 'Paris'")
    assert score(Contains("paris", ignore_case=True), sample("PARIS")).passed


def test_regex_searches_or_matches_whole() -> None:
    assert score(Regex(r"\b4\d\b"), sample("it is 42.")).reason == "matched '42'"
    assert not score(Regex(r"\d+", full=True), sample("it is 42")).passed
    with pytest.raises(ValueError, match="not a valid pattern"):
        Regex("(")


def test_output_equals_compares_structured_output_as_json() -> None:
    ctx = sample(output=Trip(city="Porto", days=3), expected={"city": "Porto", "days": 3})
    assert score(OutputEquals(), ctx).passed
    wrong = score(OutputEquals({"city": "Porto", "days": 4}), ctx)
    assert wrong.reason == "differs at $.days: 4 expected, 3 got"
    assert score(OutputEquals({"items": [1, 2]}), sample(output={"items": [1, 3]})).reason == (
        "differs at $.items[1]: 2 expected, 3 got"
    )
    extra = score(OutputEquals({"a": 1}), sample(output={"a": 1, "b": 2}))
    assert extra.reason == "differs at $.b: not expected"


def test_matches_schema_by_pydantic_type_or_json_schema() -> None:
    assert score(MatchesSchema(Trip), sample(output=Trip(city="Porto", days=3))).passed
    bad = score(MatchesSchema(Trip), sample(json.dumps({"city": "Porto", "days": "many"})))
    assert not bad.passed and bad.reason.startswith("$.days: Input should be a valid integer")
    assert (
        score(MatchesSchema(Trip), sample("not json")).reason
        == "the answer is not JSON: 'not json'"
    )
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
        "required": ["city", "days"],
    }
    assert score(MatchesSchema(schema), sample(output={"city": "Porto", "days": 2})).passed
    zero = score(MatchesSchema(schema), sample(output={"city": "Porto", "days": 0}))
    assert zero.reason == "$.days: 0 is less than the minimum of 1"
    with pytest.raises(ValueError, match="the schema is not valid"):
        MatchesSchema({"type": "no-such-type"})


def test_trajectory_subset_ordered_exact_with_arguments() -> None:
    made = [
        ToolCall(id="1", name="search", arguments={"q": "porto", "limit": 5}),
        ToolCall(id="2", name="fetch", arguments={"url": "u"}),
        ToolCall(id="3", name="search", arguments={"q": "lisbon"}),
    ]
    ctx = sample("done", calls=made)
    assert score(Trajectory(["fetch", Call("search", {"q": "lisbon"})]), ctx).passed
    part = score(Trajectory(["fetch", "delete"]), ctx)
    assert (part.value, part.reason) == (0.5, "not made: ['delete'] ([search, fetch, search])")
    # a call counts once: two searches expected, two made; three expected, two made
    assert score(Trajectory(["search", "search"]), ctx).passed
    assert score(Trajectory(["search"] * 3), ctx).value == pytest.approx(2 / 3)
    assert score(Trajectory(["search", "fetch"], mode="ordered"), ctx).passed
    assert score(
        Trajectory(["fetch", "search", "search"], mode="ordered"), ctx
    ).value == pytest.approx(2 / 3)
    exact_args = Call("search", {"q": "porto"}, exact_arguments=True)
    assert not score(Trajectory([exact_args]), ctx).passed  # limit=5 was sent too
    assert score(Trajectory([Call("search", {"q": "porto"})]), ctx).passed
    assert score(Trajectory(["search", "fetch", "search"], mode="exact"), ctx).passed
    assert score(Trajectory([], mode="exact"), sample("no tools")).reason == "exactly no tool calls"
    with pytest.raises(ValueError, match="mode 'any' is not one of"):
        Trajectory(["x"], mode="any")  # type: ignore[arg-type]


def test_bounds_each_measure() -> None:
    ctx = sample("x", usage=Usage(input=80, output=20, total_tokens=100, cost_usd=0.003))
    ok = score(Bounds(max_cost_usd=0.01, max_tokens=100, max_duration_s=2), ctx)
    assert (
        ok.passed
        and ok.reason == "cost $0.0030 ≤ $0.0100; tokens 100 ≤ 100; duration 1.50 s ≤ 2.00 s"
    )
    over = score(Bounds(max_tokens=99, max_tool_calls=0), ctx)
    assert (over.value, over.passed) == (0.5, False)
    unknown = score(Bounds(max_cost_usd=1), sample("x"))
    assert not unknown.passed and unknown.reason == "cost unknown (bound $1.0000)"
    with pytest.raises(ValueError, match="Bounds needs at least one"):
        Bounds()


def test_a_python_function_returns_bool_number_pair_or_score() -> None:
    assert score(Check(lambda ctx: "4" in ctx.text), sample("4")).passed

    @evaluator(threshold=0.5)
    def partly(ctx: EvalContext) -> tuple[float, str]:
        return 0.6, "most of it"

    got = score(partly, sample("x"))
    assert (got.name, got.value, got.passed, got.reason) == ("partly", 0.6, True, "most of it")

    async def slow(ctx: EvalContext) -> float:
        await anyio.lowlevel.checkpoint()
        return 0.2

    assert not score(Check(slow), sample("x")).passed
    with pytest.raises(TypeError, match="return a bool, a number"):
        score(Check(lambda ctx: "yes"), sample("x"))  # type: ignore[arg-type, return-value]


def test_a_judges_answer_is_read_leniently_but_must_be_a_verdict() -> None:
    assert parse_verdict('{"reasoning": "fine", "score": 0.8, "pass": true}') == (0.8, True, "fine")
    assert parse_verdict('Sure.\n```json\n{"score": 1.4}\n```') == (1.0, None, "")
    assert parse_verdict('{"pass": false, "reason": "wrong city"}') == (0.0, False, "wrong city")
    assert parse_verdict("PASS") is None
    assert parse_verdict('{"score": "high"}') is None
    assert parse_verdict('{"pass": "yes"}') is None


def test_a_judge_that_answers_no_verdict_fails_the_score_as_an_error() -> None:
    judge = Judge("be right", model=ScriptedProvider(["I think it is fine."]))
    got = score(judge, sample("answer"))
    assert got.error and not got.passed
    assert got.reason == "the judge's answer is no verdict: 'I think it is fine.'"
    assert got.usage is not None and got.usage.total_tokens > 0  # still counted


def test_a_judge_passes_on_its_threshold_without_a_pass_field() -> None:
    verdict = AssistantMessage(
        content=[TextContent(text='{"reasoning": "close", "score": 0.6}')],
    )
    judge = Judge("be right", model=ScriptedProvider([verdict, verdict]), threshold=0.7)
    assert not score(judge, sample("answer")).passed
    judge.threshold = 0.5
    assert score(judge, sample("answer")).passed


def test_a_judge_sees_the_rubric_input_reference_and_answer() -> None:
    judge = Judge("Name the capital.", model="unused")
    ctx = sample("Paris", expected="Paris")
    assert judge.prompt(ctx) == (
        "## Rubric\nName the capital.\n\n## Input\nquestion\n\n## Reference answer\nParis\n\n"
        "## The assistant's answer\nParis"
    )
    assert "Reference" not in Judge("x", model="unused", reference=False).prompt(ctx)

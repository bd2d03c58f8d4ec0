"""A run compared with a baseline run: the planted regression, improvement, unchanged, new and
gone cases are marked so per case and in aggregate; a threshold forgives small drops; the
baseline may come from the JSON file of the earlier run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from treadle import Agent
from treadle.evals import Case, Contains, Dataset, EvalRegression, EvalReport
from treadle.testing import ScriptedProvider

# what each version of the "model" answers, per case and repeat (the right answer is "yes")
ANSWERS = {
    "v1": {"a": ["yes", "yes"], "b": ["no", "no"], "c": ["yes", "no"], "gone": ["yes", "yes"]},
    "v2": {"a": ["yes", "no"], "b": ["yes", "yes"], "c": ["no", "yes"], "new": ["yes", "no"]},
}


def model(version: str) -> Any:
    return lambda case, repeat: ScriptedProvider([ANSWERS[version][case.name][repeat]])


def run(names: list[str], models: dict[str, Any]) -> EvalReport:
    dataset = Dataset([Case(n, input="yes?", evaluators=[Contains("yes")]) for n in names])

    async def go() -> EvalReport:
        return await dataset.evaluate(lambda m: Agent(m), models=models, repeat=2)

    return anyio.run(go)


@pytest.fixture(scope="module")
def baseline() -> EvalReport:
    return run(["a", "b", "c", "gone"], {"v1": model("v1")})


@pytest.fixture(scope="module")
def current() -> EvalReport:
    return run(["a", "b", "c", "new"], {"v2": model("v2")})


def test_each_case_is_marked_as_planted(baseline: EvalReport, current: EvalReport) -> None:
    comparison = current.compare(baseline)
    status = {c.case: c.status for c in comparison.cases}
    assert status == {
        "a": "regressed",
        "b": "improved",
        "c": "same",
        "new": "new",
        "gone": "missing",
    }
    a = comparison.change("a")
    assert (a.before, a.after, a.delta) == (1.0, 0.5, -0.5)
    assert (a.pass_rate_before, a.pass_rate_after) == (1.0, 0.5)
    assert comparison.change("gone").model == "v2"  # a model swap: v1's cases compare to v2's
    assert [c.case for c in comparison.regressions] == ["a"]
    assert [c.case for c in comparison.improvements] == ["b"]
    assert comparison.regressed


def test_the_aggregate_covers_the_cases_both_runs_have(
    baseline: EvalReport, current: EvalReport
) -> None:
    (m,) = current.compare(baseline).models
    assert (m.model, m.baseline_model) == ("v2", "v1")
    # a, b, c: (1 + 0 + 0.5) / 3 before, (0.5 + 1 + 0.5) / 3 now
    assert m.before == pytest.approx(0.5)
    assert m.after == pytest.approx(2 / 3)
    assert m.status == "improved"
    assert (m.regressed_cases, m.improved_cases) == (1, 1)


def test_a_threshold_forgives_smaller_drops(baseline: EvalReport, current: EvalReport) -> None:
    comparison = current.compare(baseline, threshold=0.5)
    assert comparison.change("a").status == "same"  # a drop of exactly 0.5 is within it
    assert comparison.change("b").status == "improved"  # 0 -> 1
    assert not comparison.regressed
    current.assert_no_regression(baseline, threshold=0.5)


def test_a_regression_raises_with_the_cases_named(
    baseline: EvalReport, current: EvalReport, tmp_path: Path
) -> None:
    path = baseline.save(tmp_path / "last.json")  # the baseline as the earlier run saved it
    with pytest.raises(EvalRegression) as caught:
        current.assert_no_regression(path)
    message = str(caught.value)
    assert "regressed: a [v2] score 1.000 -> 0.500, pass rate 1.000 -> 0.500" in message
    assert "improved: b [v2]" in message
    assert isinstance(caught.value, AssertionError)
    assert caught.value.comparison.change("a").status == "regressed"
    # the comparison is kept on the report and shown in its table
    assert current.comparison is not None
    assert "▼ -0.50" in current.table() and "▲ +1.00" in current.table()


def test_several_models_compare_model_by_model() -> None:
    both = {"v1": model("v1"), "v2": model("v2")}
    before = run(["a", "b"], both)
    after = run(["a", "b"], {"v1": model("v2"), "v2": model("v2")})  # v1 now answers as v2
    comparison = after.compare(before)
    status = {(c.case, c.model): c.status for c in comparison.cases}
    assert status == {
        ("a", "v1"): "regressed",
        ("b", "v1"): "improved",
        ("a", "v2"): "same",
        ("b", "v2"): "same",
    }
    # v1: (1 + 0) / 2 before, (0.5 + 1) / 2 now
    assert [(m.model, m.status) for m in comparison.models] == [("v1", "improved"), ("v2", "same")]
    assert comparison.models[0].after == pytest.approx(0.75)

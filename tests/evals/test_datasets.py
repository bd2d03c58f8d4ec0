"""Datasets written in Python or as files (YAML, JSON, JSONL): what a file's cases and
evaluators become, and the mistakes named with where they are."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from treadle import Agent
from treadle.errors import MissingExtra
from treadle.evals import (
    Bounds,
    Case,
    Check,
    Contains,
    Dataset,
    Equals,
    Judge,
    MatchesSchema,
    OutputEquals,
    Regex,
    ToolAnswer,
    Trajectory,
)

YAML = """
name: quickstart
judge_model: offline
evaluators:
  - bounds: {max_turns: 3}
cases:
  - name: sum
    input: What is 17 + 25?
    expected_output: "42"
    tags: [math]
    evaluators:
      - contains: null
      - regex: "\\\\b42\\\\b"
      - trajectory: {calls: [{name: add, arguments: {a: 17}}], mode: exact}
    script:
      - content: [{type: tool_call, id: c1, name: add, arguments: {a: 17, b: 25}}]
      - It is 42.
  - name: weather
    input:
      - Weather in Lisbon?
      - And tomorrow?
    tools:
      weather:
        - {answer: "Lisbon: clear", arguments: {city: Lisbon}}
        - {error: service down}
    evaluators:
      - equals: {value: clear, ignore_case: true}
      - judge: Says the weather.
      - check: tests.evals.test_datasets:always
      - schema: {type: object}
      - output_equals: {value: {a: 1}}
"""


def always(ctx: object) -> bool:
    return True


def test_a_yaml_dataset_becomes_cases_and_evaluators(tmp_path: Path) -> None:
    path = tmp_path / "cases.yaml"
    path.write_text(YAML)
    dataset = Dataset.from_file(path)
    assert dataset.name == "quickstart" and [c.name for c in dataset] == ["sum", "weather"]
    (shared,) = dataset.evaluators
    assert isinstance(shared, Bounds) and shared.limits["turns"] == 3
    total = dataset.cases[0]
    assert total.tags == ["math"] and total.expected_output == "42"
    kinds = [type(e) for e in total.evaluators]
    assert kinds == [Contains, Regex, Trajectory]
    trajectory = total.evaluators[2]
    assert isinstance(trajectory, Trajectory) and trajectory.mode == "exact"
    assert trajectory.expected[0].arguments == {"a": 17}
    weather = dataset.cases[1]
    assert weather.turns == ["Weather in Lisbon?", "And tomorrow?"]
    assert [type(e) for e in weather.evaluators] == [
        Equals,
        Judge,
        Check,
        MatchesSchema,
        OutputEquals,
    ]
    judge = weather.evaluators[1]
    assert (
        isinstance(judge, Judge)
        and judge.model == "offline"
        and judge.rubric == "Says the weather."
    )
    assert isinstance(weather.evaluators[4], OutputEquals) and weather.evaluators[4].expected == {
        "a": 1
    }
    assert weather.tools["weather"][1] == {"error": "service down"}


def test_a_yaml_dataset_runs_its_scripted_case(tmp_path: Path) -> None:
    from treadle import tool

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    path = tmp_path / "cases.yaml"
    path.write_text(YAML)
    dataset = Dataset.from_file(path).filter(tags=["math"])
    report = anyio.run(lambda: dataset.evaluate(lambda m: Agent(m, tools=[add])))
    (sample,) = report.samples
    assert sample.passed and sample.text == "It is 42."
    assert [s.name for s in sample.scores] == ["bounds", "contains", "regex", "trajectory"]


def test_jsonl_and_json_hold_the_same_cases(tmp_path: Path) -> None:
    cases = [
        {"name": "a", "input": "2+2?", "expected_output": "4", "evaluators": [{"contains": None}]},
        {"name": "b", "input": "3+3?", "evaluators": [{"equals": "6"}], "metadata": {"level": 1}},
    ]
    jsonl = tmp_path / "cases.jsonl"
    jsonl.write_text("\n".join(json.dumps(c) for c in cases) + "\n\n")
    as_json = tmp_path / "cases.json"
    as_json.write_text(json.dumps({"name": "arith", "cases": cases}))
    one, other = Dataset.from_file(jsonl), Dataset.from_file(as_json)
    assert one.name == "cases" and other.name == "arith"
    assert [c.name for c in one] == [c.name for c in other] == ["a", "b"]
    assert one.cases[1].metadata == {"level": 1}
    extra = Dataset.from_file(jsonl, evaluators=[Regex(r"\d")])
    assert [e.label() for e in extra.evaluators] == ["regex"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"name": "a", "input": "x", "expect": 1}', "line 1 ('a'): unknown keys ['expect']"),
        (
            '{"name": "a", "input": "x", "evaluators": [{"containz": "4"}]}',
            "unknown evaluator 'containz'",
        ),
        ('{"name": "a", "input": "x", "evaluators": [{"bounds": 3}]}', "bounds is a mapping"),
        ('{"name": "a", "input": "x", "evaluators": [{"judge": "r"}]}', "the judge needs a model"),
        ('{"name": "a"}', "case 'a' has no input"),
        ('{"name": "a", "input": "x"}\n{"name": "a", "input": "y"}', "two cases named 'a'"),
        ("{oops", "line 1 is not valid JSON"),
        (
            '{"name": "a", "input": "x", "evaluators": [{"check": "nowhere:fn"}]}',
            "No module named 'nowhere'",
        ),
    ],
)
def test_a_mistake_in_a_file_says_where(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError) as caught:
        Dataset.from_file(path)
    assert message in str(caught.value)


def test_yaml_without_pyyaml_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cases.yaml"
    path.write_text(YAML)
    monkeypatch.setitem(sys.modules, "yaml", None)  # as if not installed
    with pytest.raises(MissingExtra, match=r"\[evals\]"):
        Dataset.from_file(path)


def test_cases_in_python_are_checked_as_they_are_made() -> None:
    with pytest.raises(ValueError, match="a case needs a name"):
        Case("", input="x")
    with pytest.raises(TypeError, match="an input turn is a string or a UserMessage"):
        Case("a", input=[1])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="two evaluators are named 'contains'"):
        Case("a", input="x", evaluators=[Contains("a"), Contains("b")])
    with pytest.raises(TypeError, match="is not an Evaluator"):
        Case("a", input="x", evaluators=[lambda ctx: True])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="tool 'w': a tool's recorded answers must hold"):
        Case("a", input="x", tools={"w": []})
    case = Case("a", input="x", tools={"w": [ToolAnswer("sunny"), "rain"]}, tags="one")
    assert case.tags == ["one"]
    dataset = Dataset([case, Case("b", input="y", tags=["two"])])
    assert [c.name for c in dataset.filter(tags=["two"])] == ["b"]
    with pytest.raises(ValueError, match="no case named"):
        dataset.filter(names=["zzz"])

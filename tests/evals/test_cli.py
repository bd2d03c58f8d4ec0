"""``treadle eval``: a file's dataset run on its agent, the table printed, the JSON and HTML
written, the exit status telling CI about a regression against the last run's JSON."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from treadle.cli import main
from treadle.evals import EvalReport

EVALS = textwrap.dedent(
    """
    import os

    from treadle import Agent
    from treadle.evals import Case, Contains, Dataset

    # EVAL_BROKEN plants a mistake in "b" (a regression against a run without it)
    B = "no" if os.environ.get("EVAL_BROKEN") else "yes b"

    dataset = Dataset(
        [
            Case("a", input="a?", script=["yes a"], evaluators=[Contains("yes")]),
            Case("b", input="b?", script=[B], evaluators=[Contains("yes")], tags=["b"]),
        ],
        name="cli",
    )


    def agent(model):
        return Agent(model, system_prompt="Say yes.")
    """
)


@pytest.fixture
def evals_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "quality.py"
    path.write_text(EVALS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVAL_BROKEN", raising=False)
    monkeypatch.delenv("TREADLE_MODEL", raising=False)
    return path


def test_a_run_prints_the_table_and_writes_its_reports(
    evals_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["eval", str(evals_file), "--repeat", "2", "--json", "last.json", "--html", "r.html"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "eval cli · 2 cases · 1 model · 2 repeats" in out
    assert "scripted: score 1.00 · passed 100% of 4 · pass@1 1.00 · pass@2 1.00" in out
    assert "[4/4] pass  1.00" in err  # a line per sample: standard error is no terminal
    report = EvalReport.load(evals_file.parent / "last.json")
    assert report.case("b").pass_at == {1: 1.0, 2: 1.0}
    html = (evals_file.parent / "r.html").read_text()
    assert html.startswith("<!doctype html>") and "Content-Security-Policy" in html


def test_a_regression_against_the_baseline_exits_1(
    evals_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["eval", str(evals_file), "--json", "last.json", "-q"]) == 0
    monkeypatch.setenv("EVAL_BROKEN", "1")
    capsys.readouterr()
    assert main(["eval", str(evals_file), "--baseline", "last.json", "-q"]) == 1
    out = capsys.readouterr().out
    assert "regressed: b [scripted] score 1.000 -> 0.000" in out
    assert "▼ -1.00" in out
    # past the threshold only: a drop of 1 is within a threshold of 1
    assert main(["eval", str(evals_file), "--baseline", "last.json", "--threshold", "1", "-q"]) == 0
    assert main(["eval", str(evals_file), "--fail-under", "0.9", "-q"]) == 1
    assert "50% of the samples passed, under --fail-under 90%" in capsys.readouterr().err


def test_a_dataset_file_with_an_agent_and_tags(
    evals_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = evals_file.parent / "cases.jsonl"
    lines = [
        {"name": "x", "input": "hi", "evaluators": [{"contains": "offline"}], "tags": ["t"]},
        {"name": "y", "input": "hi", "evaluators": [{"contains": "nope"}]},
    ]
    cases.write_text("\n".join(json.dumps(line) for line in lines))
    code = main(
        ["eval", str(cases), "--agent", "quality:agent", "--model", "offline", "--tag", "t", "-q"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "eval cases · 1 case · 1 model" in out
    assert "offline: score 1.00" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "missing.py"], "no file at missing.py"),
        (["eval", "cases.jsonl"], "no dataset file at cases.jsonl"),
        (["eval", "quality.py", "--baseline", "none.json"], "no eval report at none.json"),
        (["eval", "quality.py", "--case", "zzz"], "no case named ['zzz']"),
        (["eval", "quality.py", "--repeat", "0"], "repeat and concurrency must be at least 1"),
        (["eval", "quality.py", "--target", "nothing"], "has no 'nothing'"),
    ],
)
def test_a_configuration_mistake_exits_2_with_one_line(
    evals_file: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("treadle eval: ") and message in err
    assert "Traceback" not in err

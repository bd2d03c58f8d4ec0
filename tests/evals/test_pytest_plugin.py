"""The pytest integration: a user's suite (pytest in a process of its own, sync and async
tests) fails on a planted regression naming the case; a missing baseline is written from
the run; an update accepts the new scores; a threshold forgives smaller drops."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from treadle import Agent
from treadle.evals import Case, Contains, Dataset, EvalReport, evaluate_sync
from treadle.evals.pytest_plugin import EvalFixture

SRC = Path(__file__).resolve().parents[2] / "src"

CONFTEST = 'pytest_plugins = ["treadle.evals.pytest_plugin"]\n'
TESTS = textwrap.dedent(
    """
    import os

    import pytest

    from treadle import Agent
    from treadle.evals import Case, Contains, Dataset

    B = "no" if os.environ.get("EVAL_BROKEN") else "yes"
    dataset = Dataset(
        [
            Case("a", input="a?", script=["yes"], evaluators=[Contains("yes")]),
            Case("b", input="b?", script=[B], evaluators=[Contains("yes")]),
        ]
    )


    @pytest.mark.treadle_eval(baseline="baselines/quality.json", html="report.html")
    def test_quality(treadle_eval):
        report = treadle_eval(dataset, lambda model: Agent(model), repeat=2)
        assert len(report.samples) == 4


    @pytest.fixture
    def anyio_backend():
        return "asyncio"


    @pytest.mark.anyio
    @pytest.mark.treadle_eval(baseline="baselines/async.json", threshold=1.0)
    async def test_async(treadle_eval):
        await treadle_eval.arun(dataset, lambda model: Agent(model))
    """
)


def pytest_run(folder: Path, *args: str, broken: bool = False) -> subprocess.CompletedProcess[str]:
    # only the plugins this needs: a fresh pytest with every installed plugin takes seconds
    env = {**os.environ, "PYTHONPATH": str(SRC), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("EVAL_BROKEN", None)
    if broken:
        env["EVAL_BROKEN"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "anyio", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def run(*, broken: bool) -> EvalReport:
    b = "no" if broken else "yes"
    dataset = Dataset(
        [
            Case("a", input="a?", script=["yes"], evaluators=[Contains("yes")]),
            Case("b", input="b?", script=[b], evaluators=[Contains("yes")]),
        ]
    )
    return evaluate_sync(dataset, lambda model: Agent(model), repeat=2)


@pytest.mark.slow
def test_a_users_suite_fails_on_the_regression_naming_the_case(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_quality.py").write_text(TESTS)
    run(broken=False).save(tmp_path / "baselines" / "quality.json")
    run(broken=False).save(tmp_path / "baselines" / "async.json")
    done = pytest_run(tmp_path, broken=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 1 passed" in done.stdout  # the async test's threshold forgives it
    assert "FAILED test_quality.py::test_quality" in done.stdout
    assert "regressed: b [scripted] score 1.000 -> 0.000" in done.stdout
    assert "Traceback" not in done.stdout
    assert (tmp_path / "report.html").read_text().startswith("<!doctype html>")


def fixture(tmp_path: Path, *, update: bool = False, threshold: float = 0.0) -> EvalFixture:
    return EvalFixture(
        baseline=tmp_path / "base.json", threshold=threshold, html=None, update=update
    )


def test_a_missing_baseline_is_written_from_the_run(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="no eval baseline at .*base.json"):
        fixture(tmp_path).check(run(broken=False))
    assert EvalReport.load(tmp_path / "base.json").case("b").score == 1.0
    fixture(tmp_path).check(run(broken=False))  # the same scores: nothing to say


def test_a_regression_fails_the_test_unless_updated_or_within_the_threshold(
    tmp_path: Path,
) -> None:
    run(broken=False).save(tmp_path / "base.json")
    with pytest.raises(pytest.fail.Exception, match="regressed: b"):
        fixture(tmp_path).check(run(broken=True))
    fixture(tmp_path, threshold=1.0).check(run(broken=True))
    fixture(tmp_path, update=True).check(run(broken=True))
    assert EvalReport.load(tmp_path / "base.json").case("b").score == 0.0
    fixture(tmp_path).check(run(broken=True))

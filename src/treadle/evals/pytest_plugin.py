"""pytest: run a dataset in a test and fail it on a regression against a baseline.

In ``conftest.py``::

    pytest_plugins = ["treadle.evals.pytest_plugin"]

In a test::

    @pytest.mark.treadle_eval(baseline="baselines/quickstart.json", threshold=0.05)
    def test_quality(treadle_eval):
        report = treadle_eval(dataset, make_agent, repeat=3)
        assert report.pass_rate >= 0.8

``treadle_eval(dataset, target, **options)`` runs the dataset (options: ``EvalRun``;
``await treadle_eval.arun(...)`` in an async test), compares the report with the marker's
``baseline`` (a path relative to the test file) and fails the test, listing the cases,
when a score dropped by more than ``threshold``. A missing baseline is written from this
run (with a warning); ``pytest --treadle-update-baselines`` rewrites them all. The
marker's ``html=`` writes the HTML report there too.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from .comparison import EvalRegression
from .core import Cases
from .report import EvalReport
from .runner import Target, evaluate, evaluate_sync

MARKER = "treadle_eval"
UPDATE = "--treadle-update-baselines"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("treadle-evals")
    group.addoption(
        UPDATE,
        action="store_true",
        default=False,
        help="write each treadle_eval test's report as its new baseline",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(baseline=None, threshold=0.0, html=None): the treadle_eval fixture's "
        "baseline report, the score drop that fails the test, and where to write the HTML",
    )


class EvalFixture:
    """What the ``treadle_eval`` fixture gives a test: call it to run a dataset."""

    def __init__(
        self,
        *,
        baseline: Path | None,
        threshold: float,
        html: Path | None,
        update: bool,
    ) -> None:
        self.baseline = baseline
        self.threshold = threshold
        self.html = html
        self.update = update
        self.reports: list[EvalReport] = []

    def __call__(self, dataset: Cases, target: Target, **options: Any) -> EvalReport:
        return self.check(evaluate_sync(dataset, target, **options))

    async def arun(self, dataset: Cases, target: Target, **options: Any) -> EvalReport:
        return self.check(await evaluate(dataset, target, **options))

    def check(self, report: EvalReport) -> EvalReport:
        """Compare ``report`` with the baseline; fail the test on a regression."""
        self.reports.append(report)
        if self.html is not None:
            report.write_html(self.html)
        if self.baseline is None:
            return report
        if self.update or not self.baseline.exists():
            if not self.update:
                warnings.warn(
                    f"no eval baseline at {self.baseline}: this run's report is written there",
                    UserWarning,
                    stacklevel=3,
                )
            report.save(self.baseline)
            return report
        report.compare(self.baseline, threshold=self.threshold)
        try:
            report.assert_no_regression()
        except EvalRegression as exc:
            pytest.fail(str(exc), pytrace=False)
        return report


@pytest.fixture
def treadle_eval(request: pytest.FixtureRequest) -> EvalFixture:
    """Runs a dataset and fails the test on a regression (see the module's docs)."""
    marker = request.node.get_closest_marker(MARKER)
    options: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    unknown = set(options) - {"baseline", "threshold", "html"}
    if unknown:
        raise pytest.UsageError(
            f"@pytest.mark.{MARKER} takes baseline=, threshold= and html=, not {sorted(unknown)}"
        )
    here = Path(str(request.path)).parent

    def where(value: Any) -> Path | None:
        if value is None:
            return None
        path = Path(value)
        return path if path.is_absolute() else here / path

    return EvalFixture(
        baseline=where(options.get("baseline")),
        threshold=float(options.get("threshold", 0.0)),
        html=where(options.get("html")),
        update=bool(request.config.getoption(UPDATE, default=False)),
    )

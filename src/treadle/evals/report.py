"""What an eval run found, as one object: the cases per model, the models in aggregate, the
comparison with a baseline; saved as JSON (the next run's baseline), a table, an HTML page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from .compare import compare
from .comparison import Comparison, EvalRegression
from .html import report_html
from .results import FORMAT, ReportData
from .terminal import plain_table, print_report


class EvalReport(ReportData):
    """An eval run: every case per model (``cases``), every model in aggregate
    (``summaries``), and, when it was compared with a baseline, the ``comparison``.

    ``cancelled`` says the run was stopped: the samples that finished are here, those
    that had not are in ``unfinished``. Save it with :meth:`save` (JSON: the next run's
    baseline) or :meth:`write_html`; print :meth:`table`."""

    # ---- comparing ----

    def compare(self, baseline: EvalReport | str | Path, *, threshold: float = 0.0) -> Comparison:
        """Each case and each model against ``baseline`` (a report or its JSON file): a
        score lower by more than ``threshold`` is a regression, higher by more an
        improvement. The comparison is kept in ``self.comparison``."""
        if not isinstance(baseline, EvalReport):
            baseline = EvalReport.load(baseline)
        self.comparison = compare(
            self.cases,
            self.summaries,
            baseline.cases,
            baseline.summaries,
            threshold=threshold,
            baseline=baseline.name,
            baseline_started_at=baseline.started_at,
        )
        return self.comparison

    def assert_no_regression(
        self, baseline: EvalReport | str | Path | None = None, *, threshold: float = 0.0
    ) -> None:
        """Raise :class:`~treadle.evals.EvalRegression` (an ``AssertionError``) listing the
        regressions past ``threshold`` (with no baseline: those of the comparison made)."""
        comparison = self.comparison if baseline is None else None
        if comparison is None:
            if baseline is None:
                raise ConfigurationError(
                    "assert_no_regression needs a baseline (none was compared)"
                )
            comparison = self.compare(baseline, threshold=threshold)
        if comparison.regressed:
            raise EvalRegression(comparison)

    # ---- writing ----

    def to_json(self, *, events: bool = False, indent: int | None = 1) -> str:
        """The report as JSON; ``events=True`` keeps every sample's events (large)."""
        exclude: Any = (
            None if events else {"cases": {"__all__": {"samples": {"__all__": {"events"}}}}}
        )
        return self.model_dump_json(indent=indent, exclude=exclude)

    def save(self, path: str | Path, *, events: bool = False) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json(events=events) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> EvalReport:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"no eval report at {path}") from None
        except ValueError as exc:
            raise ConfigurationError(f"{path} is not an eval report (not JSON: {exc})") from None
        if not isinstance(data, dict) or data.get("treadle_eval") != FORMAT:
            raise ConfigurationError(
                f"{path} is not a treadle eval report (a report saved by report.save() or "
                "`treadle eval --json`)"
            )
        return cls.model_validate(data)

    def table(self, *, width: int | None = None) -> str:
        """The report as a plain-text table (what ``treadle eval`` prints without rich)."""
        return plain_table(self, width=width)

    def print(self, file: Any = None) -> None:
        """Print the table: with ``rich`` on a terminal when it is installed, plain text
        otherwise (a pipe, a CI log)."""
        print_report(self, file=file)

    def to_html(self) -> str:
        """One self-contained HTML page: summary, cases, and per case each sample's
        scores, conversation and inspector timeline (the web UI's). Nothing is fetched."""
        return report_html(self)

    def write_html(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_html(), encoding="utf-8")
        return path

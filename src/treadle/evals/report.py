"""What an eval run found, as one object: the cases per model, the models in aggregate, the
comparison with a baseline; saved as JSON (the next run's baseline), a table, an HTML page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .compare import Comparison, EvalRegression, compare
from .results import CaseResult, ModelSummary, SampleResult, mean

FORMAT = 1


class Unfinished(BaseModel):
    model_config = ConfigDict(extra="forbid")

    case: str
    model: str
    repeat: int


class EvalReport(BaseModel):
    """An eval run: every case per model (``cases``), every model in aggregate
    (``summaries``), and, when it was compared with a baseline, the ``comparison``.

    ``cancelled`` says the run was stopped: the samples that finished are here, those
    that had not are in ``unfinished``. Save it with :meth:`save` (JSON: the next run's
    baseline) or :meth:`write_html`; print :meth:`table`."""

    model_config = ConfigDict(extra="forbid")

    treadle_eval: int = FORMAT
    name: str = "dataset"
    models: list[str] = Field(default_factory=list)
    repeat: int = 1
    started_at: str = ""
    duration_s: float = 0.0
    cancelled: bool = False
    unfinished: list[Unfinished] = Field(default_factory=list)
    cases: list[CaseResult] = Field(default_factory=list)
    summaries: list[ModelSummary] = Field(default_factory=list)
    comparison: Comparison | None = None

    # ---- reading ----

    def case(self, name: str, model: str | None = None) -> CaseResult:
        """The result of case ``name`` (on ``model``, needed when several ran)."""
        found = [c for c in self.cases if c.case == name and (model is None or c.model == model)]
        if len(found) == 1:
            return found[0]
        if not found:
            raise KeyError(f"no case {name!r}{f' on {model!r}' if model else ''} in the report")
        raise KeyError(f"case {name!r} ran on {[c.model for c in found]}: give model=...")

    def summary(self, model: str | None = None) -> ModelSummary:
        if model is None and len(self.summaries) == 1:
            return self.summaries[0]
        for s in self.summaries:
            if s.model == model:
                return s
        raise KeyError(f"no model {model!r} in the report (models: {self.models})")

    @property
    def samples(self) -> list[SampleResult]:
        return [s for c in self.cases for s in c.samples]

    @property
    def pass_rate(self) -> float:
        """The share of every sample, on every model, that passed."""
        samples = self.samples
        return sum(s.passed for s in samples) / len(samples) if samples else 0.0

    @property
    def score(self) -> float:
        """The mean of the cases' scores, over every model."""
        return mean([c.score for c in self.cases])

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
                raise ValueError("assert_no_regression needs a baseline (none was compared)")
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
            raise ValueError(f"{path} is not an eval report (not JSON: {exc})") from None
        if not isinstance(data, dict) or data.get("treadle_eval") != FORMAT:
            raise ValueError(
                f"{path} is not a treadle eval report (a report saved by report.save() or "
                "`treadle eval --json`)"
            )
        return cls.model_validate(data)

    def table(self, *, width: int | None = None) -> str:
        """The report as a plain-text table (what ``treadle eval`` prints without rich)."""
        from .terminal import plain_table

        return plain_table(self, width=width)

    def print(self, file: Any = None) -> None:
        """Print the table: with ``rich`` on a terminal when it is installed, plain text
        otherwise (a pipe, a CI log)."""
        from .terminal import print_report

        print_report(self, file=file)

    def to_html(self) -> str:
        """One self-contained HTML page: summary, cases, and per case each sample's
        scores, conversation and inspector timeline (the web UI's). Nothing is fetched."""
        from .html import report_html

        return report_html(self)

    def write_html(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_html(), encoding="utf-8")
        return path

"""A run compared with a baseline run, as data: each case's and each model's change, and
the error a regression raises."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import TreadleError, UnknownName

Status = Literal["regressed", "improved", "same", "new", "missing"]


class CaseChange(BaseModel):
    """A case's score (and pass rate) now and in the baseline."""

    model_config = ConfigDict(extra="forbid")

    case: str
    model: str
    before: float | None
    after: float | None
    pass_rate_before: float | None
    pass_rate_after: float | None
    status: Status

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before


class ModelChange(BaseModel):
    """A model in aggregate: its cases' mean score (and pass rate) now and in the baseline,
    over the cases both runs have, and how many of its cases regressed and improved."""

    model_config = ConfigDict(extra="forbid")

    model: str
    baseline_model: str | None
    before: float | None
    after: float | None
    pass_rate_before: float | None
    pass_rate_after: float | None
    status: Status
    regressed_cases: int = 0
    improved_cases: int = 0

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before


class Comparison(BaseModel):
    """A report compared with a baseline report. Cases match by name (and model, when
    either report ran several models; with one model each, a baseline of another model
    compares too). A score lower by more than ``threshold`` is ``regressed``."""

    model_config = ConfigDict(extra="forbid")

    threshold: float = 0.0
    baseline: str = ""
    baseline_started_at: str = ""
    cases: list[CaseChange] = Field(default_factory=list)
    models: list[ModelChange] = Field(default_factory=list)

    @property
    def regressions(self) -> list[CaseChange]:
        return [c for c in self.cases if c.status == "regressed"]

    @property
    def improvements(self) -> list[CaseChange]:
        return [c for c in self.cases if c.status == "improved"]

    @property
    def regressed(self) -> bool:
        """Whether any case or any model's mean score regressed past the threshold."""
        return bool(self.regressions) or any(m.status == "regressed" for m in self.models)

    def change(self, case: str, model: str | None = None) -> CaseChange:
        for c in self.cases:
            if c.case == case and (model is None or c.model == model):
                return c
        raise UnknownName(f"case {case!r} is not in the comparison")

    def describe(self) -> str:
        """A few lines: each model's change, then each case that regressed or improved."""
        lines = []
        for m in self.models:
            vs = (
                f" (baseline {m.baseline_model})" if m.baseline_model not in (None, m.model) else ""
            )
            lines.append(
                f"{m.model}{vs}: {m.status}, score {_num(m.before)} -> {_num(m.after)}, "
                f"{m.regressed_cases} case(s) regressed, {m.improved_cases} improved"
            )
        for c in self.cases:
            if c.status in ("regressed", "improved"):
                lines.append(
                    f"  {c.status}: {c.case} [{c.model}] score {_num(c.before)} -> "
                    f"{_num(c.after)}, pass rate {_num(c.pass_rate_before)} -> "
                    f"{_num(c.pass_rate_after)}"
                )
        return "\n".join(lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


class EvalRegression(TreadleError, AssertionError):
    """An eval run regressed against its baseline past the threshold; ``comparison`` holds
    every change."""

    def __init__(self, comparison: Comparison) -> None:
        count = len(comparison.regressions)
        super().__init__(
            f"the eval regressed against its baseline ({count} case(s) past the threshold "
            f"{comparison.threshold}):\n{comparison.describe()}"
        )
        self.comparison = comparison

"""The results of an eval run: each sample, each case per model (mean, spread, pass@k),
each model in aggregate."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigurationError, UnknownName
from ..types import Usage
from .comparison import Comparison
from .core import Score

FORMAT = 1


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of ``k`` samples drawn from ``n`` (``c`` of them
    passing) passes: ``1 - C(n-c, k) / C(n, k)``, the unbiased estimator of Chen et al.
    (2021)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ConfigurationError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def spread(values: Sequence[float]) -> float:
    return statistics.pstdev(values) if len(values) > 1 else 0.0


def total_cost(usages: Sequence[Usage]) -> float | None:
    costs = [u.cost_usd for u in usages if u.cost_usd is not None]
    return math.fsum(costs) if costs else None


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SampleResult(_Data):
    """One run of one case on one model (repeat ``repeat``, from 0).

    ``score`` is the mean of its evaluators' values and it ``passed`` when every evaluator
    passed; a sample that failed to run (``error``: it timed out, or raised) scores 0 and
    fails. ``usage`` is the agent's; ``eval_usage`` its judges'. ``events`` (every event
    of every run, a ``message_update`` with its delta only) feed the HTML report's
    timeline and are left out of JSON unless asked for."""

    case: str
    model: str
    repeat: int = 0
    passed: bool = False
    score: float = 0.0
    scores: list[Score] = Field(default_factory=list)
    output: Any = None
    text: str = ""
    reason: str | None = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    eval_usage: Usage = Field(default_factory=Usage)
    turns: int = 0
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    duration_s: float = 0.0
    transcript: list[dict[str, Any]] = Field(default_factory=list)
    events: list[dict[str, Any]] = Field(default_factory=list)

    def score_of(self, name: str) -> Score | None:
        return next((s for s in self.scores if s.name == name), None)


class EvaluatorStats(_Data):
    """One evaluator over a case's samples."""

    mean: float
    spread: float
    pass_rate: float


class CaseResult(_Data):
    """A case on one model, over its samples: the mean ``score``, its ``spread`` (the
    standard deviation of the samples' scores), ``pass_rate`` (the share of samples that
    passed) and ``pass_at`` (pass@k for each k asked for)."""

    case: str
    model: str
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    input: list[str] = Field(default_factory=list)
    expected_output: Any = None
    samples: list[SampleResult] = Field(default_factory=list)
    score: float = 0.0
    spread: float = 0.0
    pass_rate: float = 0.0
    pass_at: dict[int, float] = Field(default_factory=dict)
    evaluators: dict[str, EvaluatorStats] = Field(default_factory=dict)
    cost_usd: float | None = None
    eval_cost_usd: float | None = None
    tokens: int = 0
    errors: int = 0
    duration_s: float = 0.0

    @classmethod
    def of(cls, samples: list[SampleResult], ks: Sequence[int], **fields: Any) -> CaseResult:
        scores = [s.score for s in samples]
        passed = sum(s.passed for s in samples)
        names = list(dict.fromkeys(score.name for s in samples for score in s.scores))
        stats = {}
        for name in names:
            found = [sc for s in samples if (sc := s.score_of(name)) is not None]
            values = [sc.value for sc in found]
            stats[name] = EvaluatorStats(
                mean=mean(values),
                spread=spread(values),
                pass_rate=sum(sc.passed for sc in found) / len(found),
            )
        n = len(samples)
        return cls(
            samples=samples,
            score=mean(scores),
            spread=spread(scores),
            pass_rate=passed / n if n else 0.0,
            pass_at={k: pass_at_k(n, passed, k) for k in ks if 1 <= k <= n},
            evaluators=stats,
            cost_usd=total_cost([s.usage for s in samples]),
            eval_cost_usd=total_cost([s.eval_usage for s in samples]),
            tokens=sum(s.usage.total_tokens for s in samples),
            errors=sum(s.error is not None for s in samples),
            duration_s=mean([s.duration_s for s in samples]),
            **fields,
        )


class ModelSummary(_Data):
    """One model over every case: the mean of the cases' scores, the share of all samples
    that passed, pass@k averaged over the cases, and what it all cost."""

    model: str
    cases: int = 0
    samples: int = 0
    score: float = 0.0
    pass_rate: float = 0.0
    pass_at: dict[int, float] = Field(default_factory=dict)
    cost_usd: float | None = None
    eval_cost_usd: float | None = None
    tokens: int = 0
    errors: int = 0
    duration_s: float = 0.0

    @classmethod
    def of(cls, model: str, cases: list[CaseResult]) -> ModelSummary:
        samples = [s for c in cases for s in c.samples]
        ks = sorted({k for c in cases for k in c.pass_at})
        return cls(
            model=model,
            cases=len(cases),
            samples=len(samples),
            score=mean([c.score for c in cases]),
            pass_rate=sum(s.passed for s in samples) / len(samples) if samples else 0.0,
            pass_at={
                k: mean([c.pass_at[k] for c in cases if k in c.pass_at])
                for k in ks
                if all(k in c.pass_at for c in cases)
            },
            cost_usd=total_cost([s.usage for s in samples]),
            eval_cost_usd=total_cost([s.eval_usage for s in samples]),
            tokens=sum(c.tokens for c in cases),
            errors=sum(c.errors for c in cases),
            duration_s=math.fsum(s.duration_s for s in samples),
        )


class Unfinished(BaseModel):
    model_config = ConfigDict(extra="forbid")

    case: str
    model: str
    repeat: int


class ReportData(BaseModel):
    """An eval run's findings, as data (:class:`~treadle.evals.EvalReport` adds saving,
    comparing and printing): every case per model (``cases``), every model in aggregate
    (``summaries``), and, when it was compared with a baseline, the ``comparison``.

    ``cancelled`` says the run was stopped: the samples that finished are here, those
    that had not are in ``unfinished``."""

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
            raise UnknownName(f"no case {name!r}{f' on {model!r}' if model else ''} in the report")
        raise UnknownName(f"case {name!r} ran on {[c.model for c in found]}: give model=...")

    def summary(self, model: str | None = None) -> ModelSummary:
        if model is None and len(self.summaries) == 1:
            return self.summaries[0]
        for s in self.summaries:
            if s.model == model:
                return s
        raise UnknownName(f"no model {model!r} in the report (models: {self.models})")

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

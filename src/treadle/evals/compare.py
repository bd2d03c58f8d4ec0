"""A run against a baseline run: per case and per model, what regressed and what improved."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..errors import ConfigurationError
from .comparison import CaseChange, Comparison, ModelChange, Status
from .results import CaseResult, ModelSummary

EPSILON = 1e-9  # sums of floats in another order: no change


def _status(before: float | None, after: float | None, threshold: float) -> Status:
    if before is None:
        return "new"
    if after is None:
        return "missing"
    if after < before - threshold - EPSILON:
        return "regressed"
    if after > before + threshold + EPSILON:
        return "improved"
    return "same"


def _avg(values: Sequence[float | None]) -> float | None:
    """The mean of the values both runs have (None with none)."""
    known = [v for v in values if v is not None]
    return math.fsum(known) / len(known) if known else None


def compare(
    cases: Sequence[CaseResult],
    summaries: Sequence[ModelSummary],
    base_cases: Sequence[CaseResult],
    base_summaries: Sequence[ModelSummary],
    *,
    threshold: float = 0.0,
    baseline: str = "",
    baseline_started_at: str = "",
) -> Comparison:
    if threshold < 0:
        raise ConfigurationError(f"the regression threshold must be >= 0, got {threshold}")
    now_models = [s.model for s in summaries]
    base_models = [s.model for s in base_summaries]
    # one model on each side: compare them whatever their names (a model swap)
    renamed = len(now_models) == 1 and len(base_models) == 1
    model_map = {now_models[0]: base_models[0]} if renamed else {m: m for m in now_models}

    before = {(c.case, c.model): c for c in base_cases}
    changes: list[CaseChange] = []
    seen = set()
    for c in cases:
        key = (c.case, model_map.get(c.model, c.model))
        seen.add(key)
        old = before.get(key)
        changes.append(
            CaseChange(
                case=c.case,
                model=c.model,
                before=old.score if old else None,
                after=c.score,
                pass_rate_before=old.pass_rate if old else None,
                pass_rate_after=c.pass_rate,
                status=_status(old.score if old else None, c.score, threshold),
            )
        )
    back = {v: k for k, v in model_map.items()}
    for key, old in before.items():
        if key not in seen and (key[1] in back or not renamed):
            changes.append(
                CaseChange(
                    case=old.case,
                    model=back.get(old.model, old.model),
                    before=old.score,
                    after=None,
                    pass_rate_before=old.pass_rate,
                    pass_rate_after=None,
                    status="missing",
                )
            )
    base_by_model = {s.model: s for s in base_summaries}
    models = []
    for s in summaries:
        old_s = base_by_model.get(model_map.get(s.model, s.model))
        mine = [c for c in changes if c.model == s.model]
        both = [c for c in mine if c.before is not None and c.after is not None]
        before_score = _avg([c.before for c in both]) if old_s else None
        after_score = _avg([c.after for c in both]) if old_s else s.score
        models.append(
            ModelChange(
                model=s.model,
                baseline_model=old_s.model if old_s else None,
                before=before_score,
                after=after_score,
                pass_rate_before=_avg([c.pass_rate_before for c in both]) if old_s else None,
                pass_rate_after=_avg([c.pass_rate_after for c in both]) if old_s else s.pass_rate,
                status=_status(before_score, after_score, threshold),
                regressed_cases=sum(c.status == "regressed" for c in mine),
                improved_cases=sum(c.status == "improved" for c in mine),
            )
        )
    return Comparison(
        threshold=threshold,
        baseline=baseline,
        baseline_started_at=baseline_started_at,
        cases=changes,
        models=models,
    )

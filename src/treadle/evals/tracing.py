"""OpenTelemetry spans of an eval run (when ``opentelemetry`` is installed): ``eval
{dataset}`` over the run, ``eval_case {case}`` per sample, and under each, through
:mod:`treadle.otel`, the agent's run (``invoke_agent``, ``chat``, ``execute_tool``) and its
judges' runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..loop import Hooks
from .results import SampleResult

TRACER_NAME = "treadle.evals"


def tracing_available() -> bool:
    try:
        import opentelemetry.trace  # noqa: F401
    except ImportError:
        return False
    return True


class EvalTracing:
    """The spans of one eval run; ``hook`` traces the runs themselves (``treadle.otel``)."""

    def __init__(self, tracer_provider: Any = None) -> None:
        from opentelemetry import trace

        from ..otel import instrument

        self.trace = trace
        self.tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
        self.hook: Hooks = instrument(tracer_provider=tracer_provider, agent_name="agent")

    @contextmanager
    def run_span(self, dataset: str, models: list[str], repeat: int) -> Iterator[Any]:
        attributes: dict[str, Any] = {
            "treadle.eval.dataset": dataset,
            "treadle.eval.models": models,
            "treadle.eval.repeat": repeat,
        }
        with self.tracer.start_as_current_span(f"eval {dataset}", attributes=attributes) as span:
            yield span

    @contextmanager
    def case_span(self, case: str, model: str, repeat: int) -> Iterator[Any]:
        attributes: dict[str, Any] = {
            "treadle.eval.case": case,
            "treadle.eval.model": model,
            "treadle.eval.repeat": repeat,
        }
        with self.tracer.start_as_current_span(
            f"eval_case {case}", attributes=attributes, record_exception=False
        ) as span:
            yield span

    def finish(self, span: Any, result: SampleResult) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("treadle.eval.score", result.score)
        span.set_attribute("treadle.eval.passed", result.passed)
        for score in result.scores:
            span.set_attribute(f"treadle.eval.scores.{score.name}", score.value)
        if result.usage.cost_usd is not None:
            span.set_attribute("treadle.cost_usd", result.usage.cost_usd)
        if result.error is not None:
            span.set_attribute("error.type", "timeout" if "timed out" in result.error else "error")
            span.set_status(Status(StatusCode.ERROR, result.error))

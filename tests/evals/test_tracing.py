"""OpenTelemetry spans of an eval run: ``eval {dataset}`` over it, ``eval_case {case}`` per
sample with its score, and under each the agent's run and its judge's run (treadle.otel)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel test extra is not installed")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from treadle import Agent
from treadle.evals import Case, Contains, Dataset, EvalReport, Judge
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio

VERDICT = json.dumps({"reasoning": "fine", "score": 1, "pass": True})


def model(case: Case, repeat: int) -> ScriptedProvider:
    # "late" streams too slowly for its time limit
    return ScriptedProvider(["ok"], delay=5.0 if case.name == "late" else 0.0)


async def test_each_sample_is_a_span_with_the_agent_and_judge_runs_under_it() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    judge = Judge("says ok", model=ScriptedProvider([VERDICT]))
    dataset = Dataset(
        [
            Case("good", input="hi", evaluators=[Contains("ok")]),
            Case("judged", input="hi", evaluators=[judge]),
            Case("late", input="hi", timeout_s=0.01, evaluators=[Contains("ok")]),
        ],
        name="traced",
    )
    report: EvalReport = await dataset.evaluate(
        lambda m: Agent(m), models={"m": model}, tracer_provider=provider
    )
    finished = exporter.get_finished_spans()
    spans = {s.name: s for s in finished}
    root = spans["eval traced"]
    cases = [s for s in finished if s.name.startswith("eval_case ")]
    assert sorted(s.name for s in cases) == ["eval_case good", "eval_case judged", "eval_case late"]
    assert all(_parent(s) == root.context.span_id for s in cases)
    good = spans["eval_case good"]
    assert good.attributes is not None
    assert good.attributes["treadle.eval.score"] == 1.0
    assert good.attributes["treadle.eval.passed"] is True
    assert good.attributes["treadle.eval.scores.contains"] == 1.0
    assert good.attributes["treadle.eval.model"] == "m"
    # the agent's run under each case; the judge's run under its case too
    runs = [s for s in finished if s.name.startswith("invoke_agent")]
    judged = spans["eval_case judged"]
    assert sum(_parent(s) == good.context.span_id for s in runs) == 1
    assert sum(_parent(s) == judged.context.span_id for s in runs) == 2
    late = spans["eval_case late"]
    assert late.status.status_code is StatusCode.ERROR
    assert late.status.description == "timed out after 0.01 s"
    assert report.case("late").samples[0].error == "timed out after 0.01 s"


async def test_tracing_off_makes_no_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    dataset = Dataset([Case("a", input="hi", script=["ok"], evaluators=[Contains("ok")])])
    await dataset.evaluate(lambda m: Agent(m), tracing=False, tracer_provider=provider)
    assert exporter.get_finished_spans() == ()


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None

"""How a dataset runs: at most ``concurrency`` samples at once, a time limit per case, a
latency bound, stopping keeps what finished, several models side by side, an Agent as the
target (forks of it, its store untouched). Time-dependent tests run on trio's virtual clock,
where a scripted model's delays are exact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from trio.testing import MockClock

from treadle import Agent, AssistantMessage, ModelRequest, TextContent
from treadle.evals import (
    Bounds,
    Case,
    Check,
    Contains,
    Dataset,
    EvalReport,
    EvalRun,
    SampleResult,
)
from treadle.sessions import SqliteStore
from treadle.testing import ScriptedProvider


def virtual(fn: Any) -> Any:
    """``fn()`` on trio with a clock that jumps to the next deadline when all tasks wait."""
    return anyio.run(fn, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)})


def text(value: str) -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text=value)])


def cases(n: int, **options: Any) -> Dataset:
    return Dataset([Case(f"c{i}", input=f"q{i}", evaluators=[Contains("ok")]) for i in range(n)])


def test_at_most_concurrency_samples_run_at_once() -> None:
    inflight, peak = 0, 0

    async def slow(request: ModelRequest) -> AssistantMessage:
        nonlocal inflight, peak
        inflight += 1
        peak = max(peak, inflight)
        await anyio.sleep(1)  # virtual: every sample started by now overlaps
        inflight -= 1
        return text("ok")

    def model(case: Case, repeat: int) -> ScriptedProvider:
        return ScriptedProvider([slow])

    async def main(concurrency: int) -> EvalReport:
        return await cases(4).evaluate(
            lambda m: Agent(m), models={"m": model}, repeat=2, concurrency=concurrency
        )

    report = virtual(lambda: main(3))
    assert peak == 3 and report.pass_rate == 1.0 and len(report.samples) == 8
    peak = 0
    virtual(lambda: main(8))
    assert peak == 8  # the bound, not the scheduler, made it 3


def test_a_case_over_its_time_limit_fails_with_what_it_did_so_far() -> None:
    dataset = Dataset(
        [
            Case("slow", input="hi", timeout_s=5, evaluators=[Contains("ok")]),
            Case("quick", input="hi", evaluators=[Contains("ok")]),
        ]
    )

    def model(case: Case, repeat: int) -> ScriptedProvider:
        # a virtual second before each streamed piece and before the end
        pieces = 10 if case.name == "slow" else 1
        return ScriptedProvider(["ok " * 20], delay=1.0, chunks=pieces)

    async def main() -> EvalReport:
        return await dataset.evaluate(lambda m: Agent(m), models={"m": model})

    report = virtual(main)
    slow = report.case("slow").samples[0]
    assert slow.error == "timed out after 5 s" and not slow.passed and slow.score == 0
    assert slow.scores == []
    assert slow.duration_s == pytest.approx(5.0)
    kinds = [e["type"] for e in slow.events]  # what it did before the limit is kept
    assert kinds[:2] == ["agent_start", "turn_start"] and "message_update" in kinds
    assert report.case("quick").samples[0].passed
    assert report.summary().errors == 1


def test_a_latency_bound_reads_the_event_loops_clock() -> None:
    dataset = Dataset(
        [
            Case("fast", input="hi", evaluators=[Bounds(max_duration_s=2.5)]),
            Case("slow", input="hi", evaluators=[Bounds(max_duration_s=2.5)]),
        ]
    )

    def model(case: Case, repeat: int) -> ScriptedProvider:
        # a pause before each piece and one before the end: 1 piece -> 2 s, 3 pieces -> 4 s
        return ScriptedProvider(["ok!"], delay=1.0, chunks=1 if case.name == "fast" else 3)

    report = virtual(lambda: dataset.evaluate(lambda m: Agent(m), models={"m": model}))
    fast, slow = report.case("fast").samples[0], report.case("slow").samples[0]
    assert fast.duration_s == pytest.approx(2.0) and fast.passed
    assert slow.duration_s == pytest.approx(4.0) and not slow.passed
    assert slow.scores[0].reason == "duration 4.00 s > 2.50 s"


def test_cancel_returns_what_finished() -> None:
    runs: list[EvalRun] = []

    def stop_after_two(done: int, total: int, sample: SampleResult) -> None:
        if done == 2:
            runs[0].cancel()

    async def main() -> EvalReport:
        run = EvalRun(
            cases(3),
            lambda m: Agent(m),
            models={"m": lambda case, r: ScriptedProvider(["ok"], delay=0.5)},
            repeat=2,
            concurrency=1,
            progress=stop_after_two,
        )
        runs.append(run)
        return await run.run()

    report = virtual(main)
    assert report.cancelled
    assert [(s.case, s.repeat) for s in report.samples] == [("c0", 0), ("c1", 0)]
    assert [(u.case, u.repeat) for u in report.unfinished] == [
        ("c2", 0),
        ("c0", 1),
        ("c1", 1),
        ("c2", 1),
    ]
    assert report.case("c0").pass_rate == 1.0
    assert "CANCELLED: 4 samples unfinished" in report.table()


def test_an_outer_cancellation_leaves_the_finished_samples_in_report() -> None:
    run = EvalRun(
        cases(4),
        lambda m: Agent(m),
        models={"m": lambda case, r: ScriptedProvider(["ok"], delay=1.0, chunks=1)},
        concurrency=1,
    )

    async def main() -> None:
        with anyio.move_on_after(5):  # each sample takes 2 virtual seconds
            await run.run()

    virtual(main)
    report = run.report()
    assert [s.case for s in report.samples] == ["c0", "c1"]
    assert report.cancelled and len(report.unfinished) == 2


def test_several_models_side_by_side() -> None:
    dataset = cases(2)
    models = {
        "good": lambda case, r: ScriptedProvider(["ok"]),
        "bad": lambda case, r: ScriptedProvider(["no" if case.name == "c1" else "ok"]),
    }
    report = anyio.run(lambda: dataset.evaluate(lambda m: Agent(m), models=models))
    assert report.models == ["good", "bad"]
    assert [(c.case, c.model, c.pass_rate) for c in report.cases] == [
        ("c0", "good", 1.0),
        ("c0", "bad", 1.0),
        ("c1", "good", 1.0),
        ("c1", "bad", 0.0),
    ]
    assert [(s.model, s.pass_rate) for s in report.summaries] == [("good", 1.0), ("bad", 0.5)]
    header = report.table().splitlines()[1]
    assert "good score" in header and "bad score" in header


def test_an_agent_target_runs_on_forks_and_keeps_its_store(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "chat.db")
    own = ScriptedProvider(["ok", "ok"], name="own", model="own-model")
    agent: Agent[None] = Agent(own, store=store, session_id="main")
    report = anyio.run(lambda: cases(2).evaluate(agent, concurrency=1))
    assert report.models == ["own:own-model"] and report.pass_rate == 1.0
    assert agent.messages == [] and own.remaining == 0
    assert [s.id for s in store.list()] == ["main"]  # the samples' sessions were not stored

    other = ScriptedProvider(["ok", "ok"], name="other", model="other-model")
    report = anyio.run(lambda: cases(2).evaluate(agent, models=[other], concurrency=1))
    assert report.models == ["other:other-model"] and other.remaining == 0
    assert agent.provider is own
    agent.close()


def test_a_failing_evaluator_or_target_is_reported_not_raised() -> None:
    def broken(ctx: Any) -> bool:
        raise KeyError("no such field")

    dataset = Dataset(
        [Case("a", input="hi", script=["ok"], evaluators=[Contains("ok"), Check(broken)])]
    )
    report = anyio.run(lambda: dataset.evaluate(lambda m: Agent(m)))
    (sample,) = report.samples
    bad = sample.score_of("broken")
    assert bad is not None and bad.error and bad.reason == "KeyError: 'no such field'"
    assert not sample.passed and sample.score == 0.5

    report = anyio.run(lambda: dataset.evaluate(lambda m: "not an agent"))  # type: ignore[arg-type, return-value]
    assert report.samples[0].error is not None
    assert report.samples[0].error.startswith(
        "UsageError: the target function must return an Agent"
    )


def test_mistakes_in_the_run_are_named_before_anything_runs() -> None:
    target = lambda m: Agent(m)  # noqa: E731
    no_evaluators = Dataset([Case("a", input="hi", script=["ok"])])
    with pytest.raises(ValueError, match="case 'a' has no evaluators"):
        EvalRun(no_evaluators, target)
    with pytest.raises(ValueError, match="no model was given"):
        EvalRun(cases(1), target)
    with pytest.raises(ValueError, match="two models have one label"):
        EvalRun(cases(1), target, models=["openai:x", "openai:x"])
    with pytest.raises(ValueError, match="repeat and concurrency must be at least 1"):
        EvalRun(cases(1), target, models=["offline"], repeat=0)

"""Record once against a model over HTTP, then replay offline: a model string with a cassette
records its exchanges through the real adapter, and the same eval replayed from the file,
with no server and no key, comes out exactly as recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from treadle import Agent
from treadle.evals import Case, Contains, Dataset, EvalReport
from treadle.testing import RecordedRequest, WireFake, serve

pytestmark = pytest.mark.anyio

KEY = "sk-test-RECORDING-KEY-0123456789"


def dataset() -> Dataset:
    return Dataset(
        [
            Case("sum", input="What is 2 + 2?", evaluators=[Contains("4")]),
            Case("capital", input="The capital of France?", evaluators=[Contains("Paris")]),
        ],
        name="replayed",
    )


def answers() -> WireFake:
    asked: dict[str, int] = {}

    def answer(request: RecordedRequest) -> str:
        prompt = request.json["messages"][-1]["content"]
        asked[prompt] = asked.get(prompt, 0) + 1
        if "2 + 2" in prompt:
            return "4" if asked[prompt] == 1 else "5"  # the second sample is wrong
        return "Paris."

    return WireFake.openai([answer] * 4)


def outcome(report: EvalReport) -> list[tuple[str, int, str, bool, float]]:
    return [(s.case, s.repeat, s.text, s.passed, s.score) for s in report.samples]


async def test_an_eval_recorded_once_replays_offline_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cassette = tmp_path / "evals.cassette.json"
    fake = answers()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    async with serve(fake) as url:
        recorded = await dataset().evaluate(
            lambda model: Agent(model),
            models={"gpt": f"openai:gpt-4o-mini@{url}/v1"},
            repeat=2,
            concurrency=1,
            cassette=cassette,
        )
    fake.assert_done()
    assert outcome(recorded) == [
        ("sum", 0, "4", True, 1.0),
        ("sum", 1, "5", False, 0.0),
        ("capital", 0, "Paris.", True, 1.0),
        ("capital", 1, "Paris.", True, 1.0),
    ]
    assert KEY not in cassette.read_text()
    assert len(json.loads(cassette.read_text())["exchanges"]) == 4

    # offline: no server behind this address, no key in the environment
    monkeypatch.delenv("OPENAI_API_KEY")
    replayed = await dataset().evaluate(
        lambda model: Agent(model),
        models={"gpt": "openai:gpt-4o-mini@http://127.0.0.1:9/v1"},
        repeat=2,
        concurrency=1,
        cassette=cassette,
        cassette_mode="replay",
    )
    assert outcome(replayed) == outcome(recorded)
    assert [s.usage for s in replayed.samples] == [s.usage for s in recorded.samples]


async def test_replay_without_the_recording_says_so(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="cassette") as caught:
        await dataset().evaluate(
            lambda model: Agent(model),
            models=["openai:gpt-4o-mini"],
            cassette=tmp_path / "missing.json",
            cassette_mode="replay",
        )
    assert "missing.json" in str(caught.value)

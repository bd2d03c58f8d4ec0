"""Side calls go through the loop's model-call path (issue 21, item 6): the planning call,
the compaction summary and the post-run workers' calls are retried under the RetryPolicy,
pass the before_model_request hooks, and carry the run's model settings — checked on the
wire (the OpenAI Chat Completions fake), not on our own objects."""

from __future__ import annotations

from typing import Any

import pytest

from treadle import Agent, Hooks, ModelRequest, RunHandle, UserMessage
from treadle.ext.workers import PostRunWorkers, WorkerContext
from treadle.loop import RetryPolicy
from treadle.testing import Fail, FakeTransport
from treadle.types import PlanCreated

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(max_retries=2, initial_delay_s=0.0, max_delay_s=0.0, jitter=0.0)
SETTINGS: dict[str, Any] = {
    "seed": 7,
    "stop": ["<END>"],
    "temperature": 0.3,
    "extra_body": {"cache_prompt": True},
}


class Seen(Hooks):
    def __init__(self) -> None:
        self.purposes: list[str] = []

    async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
        self.purposes.append(request.purpose)
        return request.model_copy(update={"system_prompt": f"{request.system_prompt}\n[hooked]"})


def _carries_settings(body: dict[str, Any]) -> None:
    assert body["seed"] == 7 and body["stop"] == ["<END>"] and body["temperature"] == 0.3
    assert body["cache_prompt"] is True  # extra_body, merged into the body
    assert "[hooked]" in body["messages"][0]["content"]  # the hook's edit reached the wire


async def test_the_planning_call_is_retried_hooked_and_carries_the_settings() -> None:
    fake = FakeTransport.openai(
        [Fail(429, retry_after=0), "1. Look it up\n2. Answer", "the answer"]
    )
    seen = Seen()
    agent = Agent(
        fake.provider(),
        planning=True,
        retry=FAST,
        hooks=[seen],
        system_prompt="S",
        model_settings=SETTINGS,
    )
    events: list[Any] = []
    async with agent.stream("question") as stream:
        async for event in stream:
            events.append(event)
    assert stream.result is not None and stream.result.reason == "completed"
    # the 429 was retried: the plan was made, not silently skipped
    assert [e for e in events if isinstance(e, PlanCreated)], "the plan was skipped"
    assert len(fake.requests) == 3
    planning = fake.requests[1].json
    assert "DIRECT" in planning["messages"][0]["content"]
    _carries_settings(planning)
    assert "tools" not in planning and "response_format" not in planning
    assert seen.purposes == ["planning", "turn"]  # retries do not call the hooks again


async def test_the_compaction_summary_is_retried_hooked_and_carries_the_settings() -> None:
    fake = FakeTransport.openai([Fail(503), "a short summary", "the answer"])
    seen = Seen()
    agent = Agent(
        fake.provider(),
        retry=FAST,
        hooks=[seen],
        system_prompt="S",
        compaction={"context_window": 4096},
        model_settings=SETTINGS,
    )
    for i in range(12):  # a long history to summarise
        agent.messages.append(UserMessage.of(f"note {i}: " + "words " * 60))
    result = await agent.compact()
    assert result is not None and result.summary == "a short summary"
    summary = fake.requests[1].json
    _carries_settings(summary)
    assert seen.purposes[0] == "compaction"


class Briefing:
    name = "briefing"

    def __init__(self) -> None:
        self.text = ""

    async def run(self, ctx: WorkerContext) -> None:
        self.text = (await ctx.complete("what happened?", system="Be brief.")).text


async def test_a_worker_call_is_retried_hooked_and_carries_the_settings() -> None:
    fake = FakeTransport.openai(["the answer", Fail(500), "what happened, in brief"])
    seen = Seen()
    worker = Briefing()
    agent = Agent(
        fake.provider(),
        retry=FAST,
        hooks=[seen, PostRunWorkers([worker])],
        system_prompt="S",
        model_settings=SETTINGS,
    )
    result = await agent.run("question")
    assert result.reason == "completed"
    assert len(fake.requests) == 3  # the worker's 500 was retried
    assert worker.text == "what happened, in brief"
    _carries_settings(fake.requests[2].json)
    assert seen.purposes == ["turn", "worker"]

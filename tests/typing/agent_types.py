"""Checked by ``mypy --strict`` in CI (``.ci/run``), never run: the types a user relies on."""

from __future__ import annotations

from pydantic import BaseModel
from typing_extensions import assert_type

from treadle import Agent, RunResult
from treadle.agent import AgentStream


class Trip(BaseModel):
    city: str


async def check() -> None:
    plain = Agent("openai:gpt-4o-mini")  # no annotation needed
    assert_type(plain, Agent[None])
    result = await plain.run("hi")
    assert_type(result, RunResult[None])

    typed = Agent("openai:gpt-4o-mini", output_type=Trip)
    trip = (await typed.run("plan")).output
    assert_type(trip, Trip | None)

    async with plain.stream("hi") as events:
        assert_type(events, AgentStream[None])
        async for _ in events:
            pass
    finished: RunResult[None] = events.result  # no cast, no None check
    print(finished.text)

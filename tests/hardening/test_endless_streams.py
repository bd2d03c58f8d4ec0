"""A stream that never ends is stopped: by the run's max_duration_s and max_total_tokens, and
by the call's idle and total bounds. The history stays valid; agent_end comes once."""

from __future__ import annotations

import time

import pytest
from tests.conformance.harness import check, run_recorded

from treadle import AgentContext, AgentLoopConfig, ExecutionLimits
from treadle.loop import RetryPolicy
from treadle.testing import Slow, WireFake

pytestmark = pytest.mark.anyio

ENDLESS = "word " * 5_000  # at 10 ms a word: close to a minute, far past every bound here


def config(fake: WireFake, **limits: float) -> AgentLoopConfig:
    return AgentLoopConfig(
        provider=fake.provider("gpt-4o-mini", api_key="k"),
        limits=ExecutionLimits(**limits),  # type: ignore[arg-type]
        retry=RetryPolicy(max_retries=0),
    )


async def test_max_duration_cuts_a_streaming_answer_off() -> None:
    fake = WireFake.openai([Slow(ENDLESS, delay=0.01)])
    started = time.monotonic()
    rec = await run_recorded(["talk"], AgentContext(), config(fake, max_duration_s=0.5))
    assert time.monotonic() - started < 5
    check(rec)
    end = rec.events[-1]
    assert end.reason == "limit" and "max_duration_s" in end.error.message
    assert rec.returned[-1].text.startswith("[Agent stopped")
    cut = rec.returned[1]
    assert cut.stop_reason == "length" and len(cut.text) < len(ENDLESS)
    assert ENDLESS.startswith(cut.text)  # what came before the deadline is kept


async def test_max_total_tokens_cuts_a_streaming_answer_off() -> None:
    fake = WireFake.openai([Slow(ENDLESS, delay=0.001)])
    rec = await run_recorded(["talk"], AgentContext(), config(fake, max_total_tokens=50))
    check(rec)
    assert rec.events[-1].reason == "limit"
    assert "max_total_tokens" in rec.events[-1].error.message
    assert 0 < len(rec.returned[1].text) <= 50 * 4 + 10


async def test_a_silent_provider_times_out() -> None:
    fake = WireFake.openai([Slow("hello", start_delay=60)])
    started = time.monotonic()
    rec = await run_recorded(["hi"], AgentContext(), config(fake, max_idle_s=0.3))
    assert time.monotonic() - started < 5
    check(rec)
    end = rec.events[-1]
    assert end.reason == "error" and end.error.kind == "timeout"
    assert "max_idle_s" in end.error.message


async def test_a_call_longer_than_its_bound_times_out() -> None:
    fake = WireFake.openai([Slow(ENDLESS, delay=0.01)])
    rec = await run_recorded(["talk"], AgentContext(), config(fake, max_call_duration_s=0.4))
    check(rec)
    end = rec.events[-1]
    assert end.reason == "error" and end.error.kind == "timeout"
    assert "max_call_duration_s" in end.error.message

"""A branch shares its parent's model client and does not own it (issue 21, item 7):
closing the branch leaves the parent's HTTP client open, and a parent stream in flight is
never cut (no second request)."""

from __future__ import annotations

import pytest

from treadle import Agent
from treadle.testing import Slow, WireFake, serve

pytestmark = pytest.mark.anyio


async def test_closing_a_branch_leaves_the_parents_stream_alone() -> None:
    fake = WireFake.openai(
        ["first", Slow("the parent keeps streaming this answer", delay=0.02), "third"]
    )
    async with serve(fake) as url:
        parent = Agent("openai:gpt-4o-mini", api_key="k", base_url=f"{url}/v1")
        try:
            assert (await parent.run("one")).text == "first"
            branch = parent.branch()
            texts: list[str] = []
            async with parent.stream("two") as stream:
                async for event in stream:
                    if event.type == "message_update" and not texts:
                        await branch.aclose()  # mid-stream of the parent
                    if event.type == "message_update":
                        texts.append(event.delta.text)  # type: ignore[union-attr]
            assert stream.result is not None and stream.result.reason == "completed"
            assert stream.result.text == "the parent keeps streaming this answer"
            assert "".join(texts) == "the parent keeps streaming this answer"
            assert len(fake.requests) == 2, "the parent's stream was cut and sent again"
            assert (await parent.run("three")).text == "third"  # its client is still open
        finally:
            await parent.aclose()

"""The translators on their own, with events from a real loop run (no server): a message the
provider did not stream still reaches the client whole, and custom events (a post-run
worker's) map to AG-UI ``CUSTOM`` and AI SDK ``data-*`` parts."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from treadle import AgentContext, AgentEvent, AgentLoopConfig, AssistantMessage, Hooks, agent_loop
from treadle.loop import RunEnding
from treadle.providers import ModelRequest, StreamDone, StreamStart
from treadle.ui.ag_ui import AGUITranslator
from treadle.ui.vercel_ai import VercelAITranslator

pytestmark = pytest.mark.anyio


class Unstreamed:
    """A provider that sends its answer only in the final event (no deltas)."""

    name = "whole"
    model = "whole-1"

    async def stream(self, request: ModelRequest, *, cancel: Any = None) -> Any:
        yield StreamStart(model=self.model)
        yield StreamDone(message=AssistantMessage(content="All at once."))


class Summary(Hooks):
    async def before_end(self, ending: RunEnding) -> None:
        await ending.emit("summary", {"words": 3})


async def events() -> list[AgentEvent]:
    send, receive = anyio.create_memory_object_stream[AgentEvent](100)
    config = AgentLoopConfig(provider=Unstreamed(), hooks=[Summary()])  # type: ignore[arg-type]
    async with send:
        await agent_loop("hi", AgentContext(), config, send)
    async with receive:
        return [e async for e in receive]


async def test_ag_ui_gets_unstreamed_text_and_custom_events() -> None:
    translator = AGUITranslator("r1", "t1")
    frames = [f for e in await events() for f in translator.translate(e)]
    kinds = [f["type"] for f in frames if isinstance(f, dict)]
    content = [
        f["delta"] for f in frames if isinstance(f, dict) and f["type"] == "TEXT_MESSAGE_CONTENT"
    ]
    assert content == ["All at once."]
    assert {"type": "CUSTOM", "name": "summary", "value": {"words": 3}} in frames
    assert kinds.index("CUSTOM") < kinds.index("RUN_FINISHED")


async def test_vercel_gets_unstreamed_text_and_data_parts() -> None:
    translator = VercelAITranslator("r1")
    frames = [f for e in await events() for f in translator.translate(e)]
    deltas = [f["delta"] for f in frames if isinstance(f, dict) and f["type"] == "text-delta"]
    assert deltas == ["All at once."]
    assert {"type": "data-summary", "data": {"words": 3}} in frames
    assert frames[-1] == "[DONE]"

"""The translators on their own, with events from a real loop run (no server): a message the
provider did not stream still reaches the client whole, and custom events (a post-run
worker's) map to AG-UI ``CUSTOM`` and AI SDK ``data-*`` parts."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AssistantMessage,
    Hooks,
    RunHandle,
    TextContent,
    ToolCall,
    agent_loop,
)
from treadle.loop import RunEnding
from treadle.providers import ModelRequest, StreamDone, StreamStart
from treadle.testing import ScriptedProvider
from treadle.types import Citation, ThinkingContent
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
    async def before_end(self, run: RunHandle, ending: RunEnding) -> None:
        await run.emit("summary", {"words": 3})


async def events(provider: Any = None) -> list[AgentEvent]:
    send, receive = anyio.create_memory_object_stream[AgentEvent](200)
    config = AgentLoopConfig(provider=provider or Unstreamed(), hooks=[Summary()])
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


async def test_ag_ui_one_message_id_for_an_assistant_message_and_its_reasoning() -> None:
    """Thinking, text and a tool call in one assistant message: the text and the call's
    ``parentMessageId`` share the message's id (``@ag-ui/client`` rebuilds one message);
    the thinking is one reasoning message with an id of its own."""
    call = ToolCall(id="c1", name="missing", arguments={})
    first = AssistantMessage(
        content=[ThinkingContent(thinking="Hmm."), TextContent(text="Looking."), call]
    )
    provider = ScriptedProvider([first, "Done."], chunks=3)
    translator = AGUITranslator("r1", "t1")
    frames = [f for e in await events(provider) for f in translator.translate(e)]
    data = [f for f in frames if isinstance(f, dict)]

    def ids(kind: str, key: str = "messageId") -> list[str]:
        return [f[key] for f in data if f["type"] == kind]

    text, answer = ids("TEXT_MESSAGE_START")
    assert set(ids("TEXT_MESSAGE_CONTENT")) == {text, answer} and text != answer
    assert ids("TOOL_CALL_START", "parentMessageId") == [text]
    (reasoning,) = set(ids("REASONING_MESSAGE_START") + ids("REASONING_START"))
    assert reasoning not in (text, answer)
    assert set(ids("REASONING_MESSAGE_CONTENT") + ids("REASONING_END")) == {reasoning}


async def test_vercel_gets_unstreamed_text_and_data_parts() -> None:
    translator = VercelAITranslator("r1")
    frames = [f for e in await events() for f in translator.translate(e)]
    deltas = [f["delta"] for f in frames if isinstance(f, dict) and f["type"] == "text-delta"]
    assert deltas == ["All at once."]
    assert {"type": "data-summary", "data": {"words": 3}} in frames
    assert frames[-1] == "[DONE]"


async def test_vercel_sends_each_cited_web_page_once_after_the_text() -> None:
    """A cited answer: one ``source-url`` per distinct web page, after its text and before
    the step ends; a citation without an http(s) address (a document, a ``javascript:`` or
    ``gs:`` one) sends none. AG-UI has no event for a
    source: its frames are the same as for the text alone."""
    page = "https://news.example.org/first-flush-2026"
    cited = AssistantMessage(
        content=[
            TextContent(text="Green tea is not oxidised.", citations=[
                Citation(kind="char_location", title="Tea notes", document_index=0),
                Citation(kind="url_citation", url=page, title="An early first flush"),
            ]),
            TextContent(text=" The harvest came early.", citations=[
                Citation(kind="url_citation", url=page, title="An early first flush"),
                Citation(kind="web", url="https://tea.example.com/harvest"),
                Citation(kind="url_citation", url="javascript:alert(1)", title="Click"),
                Citation(kind="retrievedContext", url="gs://corpus/notes.pdf"),
            ]),
        ]
    )  # fmt: skip
    translator = VercelAITranslator("r1")
    frames = [f for e in await events(ScriptedProvider([cited])) for f in translator.translate(e)]
    data = [f for f in frames if isinstance(f, dict)]
    sources = [f for f in data if f["type"] == "source-url"]
    assert sources == [
        {"type": "source-url", "sourceId": "r1-1-source-0", "url": page,
         "title": "An early first flush"},
        {"type": "source-url", "sourceId": "r1-1-source-1", "url": "https://tea.example.com/harvest"},
    ]  # fmt: skip
    kinds = [f["type"] for f in data]
    last_text = max(i for i, kind in enumerate(kinds) if kind == "text-end")
    assert last_text < kinds.index("source-url") < kinds.index("finish-step")

    texts = [b.text for b in cited.content if isinstance(b, TextContent)]
    plain = AssistantMessage(content=[TextContent(text=text) for text in texts])
    kinds_by_message = []
    for message in (cited, plain):
        ag_ui = AGUITranslator("r1", "t1")
        found = [f for e in await events(ScriptedProvider([message])) for f in ag_ui.translate(e)]
        kinds_by_message.append([f["type"] for f in found if isinstance(f, dict)])
    with_sources, without = kinds_by_message
    assert with_sources == without

"""Citations from every adapter that gets them: bodies written from each provider's documented
format (tests/fixtures/citations), replayed through the wire fakes over several chunkings;
their place in the loop's partial and final messages; and a history with citations sent
back as its text alone."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests import wire

from treadle import Agent, AgentContext, AgentLoopConfig, agent_loop
from treadle.loop import Hooks, RunHandle
from treadle.providers import (
    Anthropic,
    Bedrock,
    Gemini,
    ModelRequest,
    Ollama,
    OpenAIChat,
    OpenAIResponses,
    Provider,
)
from treadle.providers.base import StreamDone, StreamEvent, TextEnd
from treadle.testing import Cassette, Raw, WireFake
from treadle.testing.formats.bedrock import frame
from treadle.types import (
    AgentEvent,
    AssistantMessage,
    Citation,
    MessageEnd,
    MessageUpdate,
    TextContent,
    TextDelta,
    UserMessage,
)

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "citations"
FAKES: dict[str, Callable[..., WireFake]] = {
    "anthropic": WireFake.anthropic,
    "responses": WireFake.responses,
    "chat.completions": WireFake.openai,
    "google": WireFake.gemini,
    "bedrock": WireFake.bedrock,
}


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def fake_for(fixture: dict[str, Any], how: str | int = "whole") -> WireFake:
    """A wire fake answering with the fixture's body cut into chunks by ``how``."""
    response = fixture["response"]
    headers = response["headers"]
    body = response["body"]
    if isinstance(body, list):  # Bedrock's stream: its events, framed here
        chunks = [frame(name, payload) for name, payload in body]
    else:
        chunks = wire.split(body.encode("utf-8"), how)
    provider = fixture["provider"]
    make = FAKES[provider if provider in FAKES else fixture["api"]]
    return make([Raw(chunks, headers=headers)])


async def replay(fixture: dict[str, Any], how: str | int = "whole") -> list[StreamEvent]:
    streaming = "stream" in fixture["name"].split("/")[1]
    provider = fake_for(fixture, how).provider(stream=streaming)
    request = ModelRequest(messages=[UserMessage.of("hi")])
    return [event async for event in provider.stream(request)]


def docs(kind: str, title: str, quoted: str, index: int, span: tuple[int, int]) -> Citation:
    return Citation(
        kind=kind,
        title=title,
        cited_text=quoted,
        document_index=index,
        source_start=span[0],
        source_end=span[1],
    )


TEA = "Green tea is made from unoxidised leaves. "
BREW = "Brew green tea at 80 °C for two minutes."
FREE = "Orders over 30 EUR ship free."
EARLY = "Growers began plucking two weeks earlier than usual this year."
SHIPPED = "The first flush shipped on 14 March."
NEWS = "https://news.example.org/first-flush-2026"
KB = "https://kb.example.com/harvest-log"
ANTHROPIC_DOCS = {
    1: [docs("char_location", "Tea notes", TEA, 0, (0, 42))],
    3: [docs("page_location", "Brewing guide", BREW, 1, (2, 3))],
    5: [docs("content_block_location", "Shop FAQ", FREE, 2, (1, 2))],
}
REDIRECT = "https://vertexaisearch.cloud.google.com/grounding-api-redirect/"
FIRST = "Die erste Ernte 2026 in Darjeeling begann zwei Wochen früher als üblich."
SECOND = "Die Preise für First-Flush-Tee stiegen um etwa 8 %."
MATCHA = "Matcha for ceremonies is shade-grown in Uji, Kyōto, for about three weeks before picking."
BEDROCK = {
    0: [docs("documentChar", "Tea notes", TEA, 0, (0, 42))],
    2: [docs("documentPage", "Brewing guide", BREW, 1, (2, 3))],
    4: [docs("documentChunk", "Shop FAQ", FREE, 2, (1, 2))],
    6: [Citation(kind="web", url=NEWS, title="An early first flush", cited_text=EARLY)],
    8: [docs("searchResultLocation", "Harvest log", SHIPPED, 0, (0, 1)).model_copy(
        update={"url": KB})],
}  # fmt: skip


def web(url: str, title: str, start: int, end: int) -> Citation:
    return Citation(kind="url_citation", url=url, title=title, start=start, end=end)


def grounded(n: int, title: str, start: int, end: int) -> Citation:
    return Citation(kind="web", url=f"{REDIRECT}AbF9wXE{n}", title=title, start=start, end=end)


# Per fixture: the citations of each text block that has some, by block index.
EXPECTED: dict[str, dict[int, list[Citation]]] = {
    "anthropic/messages-stream-citations-documents": ANTHROPIC_DOCS,
    "anthropic/messages-citations-documents": ANTHROPIC_DOCS,
    "anthropic/messages-citations-web-search": {
        2: [Citation(kind="web_search_result_location", url=NEWS, title="An early first flush",
                     cited_text=EARLY)],
        4: [Citation(kind="search_result_location", url=KB, title="Harvest log",
                     cited_text=SHIPPED, document_index=0, source_start=0, source_end=1)],
    },
    "openai/responses-stream-web-search-citations": {
        0: [web(f"{NEWS}?utm_source=openai", "An early first flush", 36, 115),
            web("https://tea.example.com/prices?utm_source=openai", "Tea prices in 2026", 137,
                204)],
    },
    "openai/responses-file-search-citations": {
        0: [Citation(kind="file_citation", title="warranty.pdf", file_id="file-7Zq2WarrantyPdf",
                     start=43, end=43),
            Citation(kind="file_citation", title="care-guide.md", file_id="file-3Kd9CareGuide",
                     start=81, end=81),
            Citation(kind="container_file_citation", title="claims.png",
                     file_id="cfile_68f0d1f3claims", start=115, end=125)],  # no file_path
    },
    "openai/chat-search-citations": {
        0: [web(f"{NEWS}?utm_source=openai", "An early first flush", 36, 115),
            web("https://tea.example.com/sold-out?utm_source=openai", "Sold out", 145, 214)],
    },
    "google/stream-google-search-grounding": {
        0: [grounded(1, "news.example.org", 0, 72), grounded(2, "tea.example.com", 73, 124),
            grounded(1, "news.example.org", 73, 124)],
    },
    "google/generate-rag-grounding": {
        0: [Citation(kind="retrievedContext", url="gs://tea-corpus/matcha-guide.pdf",
                     title="matcha-guide.pdf", start=0, end=len(MATCHA),
                     cited_text="Tencha leaves are shaded for roughly 20 days before the "
                     "harvest in Uji.")],
    },
    "bedrock/converse-citations": BEDROCK,
    "bedrock/converse-stream-citations": BEDROCK,
}  # fmt: skip
EXPECTED["openai/chat-stream-search-citations"] = EXPECTED["openai/chat-search-citations"]
# What each span of text is, where the provider cites a span.
SPANS = {
    "google/stream-google-search-grounding": [FIRST, SECOND, SECOND],
    "google/generate-rag-grounding": [MATCHA],
    "openai/responses-file-search-citations": ["", "", "claims.png"],
}


def every_fixture() -> list[str]:
    return sorted(f"{p.parent.name}/{p.stem}" for p in FIXTURES.glob("*/*.json"))


def test_every_fixture_is_expected() -> None:
    assert every_fixture() == sorted(EXPECTED)


def cited(message: AssistantMessage) -> dict[int, list[Citation]]:
    return {
        i: block.citations
        for i, block in enumerate(message.content)
        if isinstance(block, TextContent) and block.citations
    }


@pytest.mark.parametrize("how", ["whole", "lines", 1, 2])
@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.one_backend  # parsing bytes: the backend cannot matter
async def test_citations_from_each_documented_body(name: str, how: str | int) -> None:
    fixture = load(name)
    events = await replay(fixture, how)
    done = events[-1]
    assert isinstance(done, StreamDone)
    message = wire.check_consistency(events, done.message.provider)
    assert cited(message) == EXPECTED[name]
    # the block's end carries its citations: what the loop puts on the partial message
    ends = {e.index: e.citations for e in events if isinstance(e, TextEnd) and e.citations}
    assert ends == EXPECTED[name]
    for citation, text in zip(cited(message).get(0, []), SPANS.get(name, []), strict=False):
        assert message.content[0].text[citation.start : citation.end] == text  # type: ignore[union-attr]
    if fixture["api"] in ("responses", "chat.completions"):
        for citation in cited(message)[0]:  # OpenAI's span is the markdown link to the source
            span = message.content[0].text[citation.start : citation.end]  # type: ignore[union-attr]
            assert citation.kind != "url_citation" or span.endswith(f"({citation.url})")


def sse_events(body: str) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for chunk in body.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines() if ": " in line)
        if "data" in lines:
            found.append((lines.get("event", ""), json.loads(lines["data"])))
    return found


def sse_body(events: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


@pytest.mark.parametrize(
    "spelling", ["response.output_text.annotation.added", "response.output_text_annotation.added"]
)
@pytest.mark.one_backend
async def test_responses_annotations_streamed_alone_reach_the_message(spelling: str) -> None:
    """Annotations that only the streaming events carry (the finished part and item without
    them), under the API reference's event name and the one some SDKs use."""
    fixture = load("openai/responses-stream-web-search-citations")
    events = []
    for name, data in sse_events(fixture["response"]["body"]):
        text = json.dumps(data)
        if name == "response.output_text.annotation.added":
            name = data["type"] = spelling
        elif "annotations" in text:  # the part, the item, the response: no annotations
            data = json.loads(text.replace('"annotations": [{', '"dropped": [{'))
        events.append((name, data))
    assert sum(name == spelling for name, _ in events) == 2
    fixture["response"]["body"] = sse_body(events)
    done = (await replay(fixture))[-1]
    assert isinstance(done, StreamDone)
    assert cited(done.message) == EXPECTED["openai/responses-stream-web-search-citations"]


@pytest.mark.one_backend
async def test_chat_annotations_before_the_text_wait_for_it() -> None:
    """A server that sends the annotations first (some OpenAI-compatible ones do): they
    cite the text that follows."""
    url = {"url": NEWS, "title": "Early", "start_index": 0, "end_index": 5}
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "annotations": [
            {"type": "url_citation", "url_citation": url}]}}]},
        {"choices": [{"index": 0, "delta": {"content": "Early."}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]  # fmt: skip
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    provider = WireFake.openai([Raw(body)]).provider()
    events = [e async for e in provider.stream(ModelRequest(messages=[UserMessage.of("hi")]))]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert cited(done.message) == {0: [web(NEWS, "Early", 0, 5)]}


# ---------------------------------------------------------------- in the loop


class Seen(Hooks):
    """Every update's message and the final message as JSON, taken when each event came."""

    def __init__(self) -> None:
        self.updates: list[tuple[MessageUpdate, str]] = []
        self.final: AssistantMessage | None = None

    def on_event(self, run: RunHandle, event: AgentEvent) -> None:
        if isinstance(event, MessageUpdate):
            self.updates.append((event, event.message.model_dump_json()))
        elif isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage):
            self.final = event.message


async def run_loop_on(name: str) -> Seen:
    fixture = load(name)
    seen = Seen()
    provider = fake_for(fixture, "lines").provider()
    config = AgentLoopConfig(provider=provider, hooks=[seen], coalesce_deltas=False)
    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    async with send, receive:
        await agent_loop("hi", AgentContext(), config, send)
    return seen


@pytest.mark.parametrize(
    "name",
    ["anthropic/messages-stream-citations-documents", "openai/chat-stream-search-citations"],
)
async def test_citations_join_the_partial_message_when_their_block_ends(name: str) -> None:
    seen = await run_loop_on(name)
    expected = EXPECTED[name]
    assert seen.final is not None and cited(seen.final) == expected  # at message_end
    texts: dict[int, str] = {}
    for update, dumped in seen.updates:
        delta = update.delta
        assert isinstance(delta, TextDelta)  # no other kind of delta: citations are none
        texts[delta.index] = texts.get(delta.index, "") + delta.text
        message = update.message
        assert message.model_dump_json() == dumped  # an update never changes once seen
        for index, citations in expected.items():
            if index < len(message.content):
                block = message.content[index]
                assert isinstance(block, TextContent)
                ended = delta.index > index  # a later block streams: this one has ended
                assert block.citations == (citations if ended else [])
    # INV-DELTAS: each block's deltas, joined, are its text
    assert texts == {i: b.text for i, b in enumerate(seen.final.content)}  # type: ignore[union-attr]


# ---------------------------------------------------------------- sending a history back


def cited_history() -> tuple[list[Any], list[Any]]:
    """A conversation whose answer has citations, and the same without them."""
    sources = [
        Citation(kind="char_location", title="Tea notes", cited_text=TEA, document_index=0),
        web(NEWS, "An early first flush", 0, 9),
    ]
    with_them = AssistantMessage(
        content=[TextContent(text="Green tea", citations=sources), TextContent(text=".")],
        provider="any",
    )
    without = with_them.model_copy(update={"content": [TextContent(text="Green tea"),
                                                       TextContent(text=".")]})  # fmt: skip
    ask, more = UserMessage.of("How is green tea made?"), UserMessage.of("Thanks. And black?")
    return [ask, with_them, more], [ask, without, more]


ADAPTERS: dict[str, Callable[[], Provider]] = {
    "anthropic": lambda: Anthropic("claude-sonnet-4-5", api_key="k"),
    "openai-responses": lambda: OpenAIResponses("gpt-5", api_key="k"),
    "openai-chat": lambda: OpenAIChat("gpt-4o", api_key="k"),
    "gemini": lambda: Gemini("gemini-2.5-flash", api_key="k"),
    "bedrock": lambda: Bedrock("anthropic.claude-sonnet-4-5", api_key="k", region="us-east-1"),
    "ollama": lambda: Ollama("llama3.2"),
}


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_a_cited_answer_goes_back_as_its_text(adapter: str) -> None:
    with_them, without = cited_history()
    provider: Any = ADAPTERS[adapter]()
    sent = provider.build_body(ModelRequest(messages=with_them))
    assert sent == provider.build_body(ModelRequest(messages=without))
    assert "citations" not in json.dumps(sent) and NEWS not in json.dumps(sent)


BEFORE = Path(__file__).resolve().parents[1] / "fixtures" / "before-citations"
CASSETTE = BEFORE / "anthropic-two-turns.json"


async def two_turns(provider: Provider) -> list[Any]:
    agent = Agent(provider)
    await agent.run("How is green tea made and brewed, and when is shipping free?")
    await agent.run("And black tea?")
    return agent.messages


async def test_a_cassette_recorded_before_citations_replays_and_records_the_same(
    tmp_path: Path,
) -> None:
    """The cassette was recorded by the code before citations: its first answer cites three
    documents, and the second request carries that answer back. Replayed now (requests
    matched by body), the answer has its citations and the second request is still the
    same bytes; recorded again, the file is the same."""
    replay = Cassette(CASSETTE, mode="replay")
    provider = Anthropic("claude-sonnet-4-5", api_key="k", client=replay.client())
    messages = await two_turns(provider)
    await provider.aclose()
    replay.assert_all_played()
    assert cited(messages[1]) == ANTHROPIC_DOCS

    fixture = load("anthropic/messages-stream-citations-documents")
    answer = Raw(fixture["response"]["body"], headers=fixture["response"]["headers"])
    fake = WireFake.anthropic([answer, "Black tea is fully oxidised."])
    again = Cassette(tmp_path / "again.json", mode="record")
    provider = fake.provider("claude-sonnet-4-5", client=again.client(fake))
    await two_turns(provider)
    await provider.aclose()
    assert (tmp_path / "again.json").read_bytes() == CASSETTE.read_bytes()


def test_anthropic_asks_for_citations_on_every_document_when_told() -> None:
    """``cite_documents=True``: each document block, a tool result's too, asks for
    citations (what the documents fixture's request carries); off, the body is as before."""
    from treadle.providers.vertex import VertexAnthropic
    from treadle.types import FileContent, ToolCall, ToolResultMessage

    note = FileContent.from_bytes(TEA.encode(), "text/plain", name="Tea notes")
    guide = FileContent.from_bytes(b"%PDF-1.4\n%%EOF\n", "application/pdf", name="Guide")
    call = ToolCall(id="c1", name="fetch", arguments={})
    history = [
        UserMessage.of("Read these.", files=[note]),
        AssistantMessage(content=[call], stop_reason="tool_use", provider="anthropic"),
        ToolResultMessage(tool_call_id="c1", tool_name="fetch", content=[guide]),
    ]
    request = ModelRequest(messages=history)

    def documents(body: dict[str, Any]) -> list[dict[str, Any]]:
        found = []
        for turn in body["messages"]:
            for block in turn["content"]:
                found += [p for p in [block, *block.get("content", [])] if p["type"] == "document"]
        return found

    plain = Anthropic("claude-sonnet-4-5", api_key="k").build_body(request)
    assert len(documents(plain)) == 2 and all("citations" not in d for d in documents(plain))
    for provider in (
        Anthropic("claude-sonnet-4-5", api_key="k", cite_documents=True),
        VertexAnthropic("claude-sonnet-4-5", project="p", auth=lambda: "t", cite_documents=True),
    ):
        cited = documents(provider.build_body(request))
        assert [d["citations"] for d in cited] == [{"enabled": True}] * 2
    recorded = load("anthropic/messages-stream-citations-documents")["request"]["body"]
    sent = [b for b in recorded["messages"][0]["content"] if b["type"] == "document"]
    assert {json.dumps(d["citations"]) for d in sent} == {json.dumps({"enabled": True})}

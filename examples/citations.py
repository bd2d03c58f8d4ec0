"""Citations: print each sentence of an answer with the source it came from.

A research agent asks two providers about tea. Anthropic answers from the documents sent
with the question (a plain-text note, a PDF, a FAQ), one text block per cited passage;
OpenAI's Responses API answers from a web search, its annotations marking the links in the
text. treadle reads both into the same `Citation`s on each `TextContent`, and this script
prints each cited sentence with its source, whichever provider answered.

Offline it replays responses in each provider's documented wire format through treadle's
wire fakes (no key, no network); the adapters are the real ones. With
TREADLE_MODEL=anthropic:claude-sonnet-4-5 (and a key) a real model answers the documents.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import anyio

from treadle import Agent, AssistantMessage, TextContent, UserMessage
from treadle.providers import Provider, get_provider
from treadle.testing import Raw, WireFake
from treadle.types import Citation, FileContent

NOTE = "Green tea is made from unoxidised leaves. Black tea is fully oxidised."
FAQ = "We ship tea worldwide. Orders over 30 EUR ship free."
PDF = b"%PDF-1.4\n1 0 obj <</Type /Catalog>> endobj\ntrailer <</Root 1 0 R>>\n%%EOF\n"


def sse(events: list[dict[str, Any]]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def anthropic_answer() -> str:
    """A streamed Messages answer citing three documents (Anthropic's citations docs)."""
    passages: list[tuple[str, dict[str, Any] | None]] = [
        ("Your documents say that ", None),
        ("green tea comes from leaves that are not oxidised", {
            "type": "char_location", "cited_text": NOTE[:42], "document_index": 0,
            "document_title": "Tea notes", "start_char_index": 0, "end_char_index": 42}),
        (", that ", None),
        ("it is brewed at 80 °C for two minutes", {
            "type": "page_location", "cited_text": "Brew green tea at 80 °C for two minutes.",
            "document_index": 1, "document_title": "Brewing guide",
            "start_page_number": 2, "end_page_number": 3}),
        (", and that ", None),
        ("orders over 30 EUR ship free", {
            "type": "char_location", "cited_text": FAQ[23:], "document_index": 2,
            "document_title": "Shop FAQ", "start_char_index": 23, "end_char_index": len(FAQ)}),
        (".", None),
    ]  # fmt: skip
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {
        "id": "msg_tea", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [], "usage": {"input_tokens": 900, "output_tokens": 1}}}]  # fmt: skip
    for i, (text, cited) in enumerate(passages):
        block = {"type": "text", "text": "", **({"citations": []} if cited else {})}
        events.append({"type": "content_block_start", "index": i, "content_block": block})
        if cited:
            delta = {"type": "citations_delta", "citation": cited}
            events.append({"type": "content_block_delta", "index": i, "delta": delta})
        delta = {"type": "text_delta", "text": text}
        events.append({"type": "content_block_delta", "index": i, "delta": delta})
        events.append({"type": "content_block_stop", "index": i})
    events.append({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                   "usage": {"output_tokens": 60}})  # fmt: skip
    events.append({"type": "message_stop"})
    return sse(events)


def openai_answer() -> str:
    """A streamed Responses answer after a web search: url_citation annotations, each
    added once the link it covers has streamed (OpenAI's streaming reference)."""
    text = (
        "The 2026 first flush came early ([news.example.org](https://news.example.org/flush)). "
        "Prices rose by 8% ([tea.example.com](https://tea.example.com/prices))."
    )
    links = [(m.start(), m.end(), m.group(1)) for m in re.finditer(r"\[.*?\]\((.*?)\)", text)]
    titles = ["An early first flush", "Tea prices in 2026"]
    key = {"item_id": "msg_1", "output_index": 1, "content_index": 0}
    response = {"id": "resp_tea", "model": "gpt-5", "status": "in_progress", "output": []}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response},
        {"type": "response.output_item.added", "output_index": 1,
         "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}},
        {"type": "response.content_part.added", **key,
         "part": {"type": "output_text", "text": "", "annotations": []}},
    ]  # fmt: skip
    done = 0
    for n, ((start, end, url), title) in enumerate(zip(links, titles, strict=True)):
        events.append({"type": "response.output_text.delta", **key, "delta": text[done:end]})
        annotation = {"type": "url_citation", "url": url, "title": title,
                      "start_index": start, "end_index": end}  # fmt: skip
        events.append({"type": "response.output_text.annotation.added", **key,
                       "annotation_index": n, "annotation": annotation})  # fmt: skip
        done = end
    events.append({"type": "response.output_text.delta", **key, "delta": text[done:]})
    events.append({"type": "response.output_text.done", **key, "text": text})
    usage = {"input_tokens": 4000, "output_tokens": 90, "total_tokens": 4090}
    events.append({"type": "response.completed",
                   "response": {**response, "status": "completed", "usage": usage}})  # fmt: skip
    return sse(events)


def sentence_of(text: str, citation: Citation) -> str:
    """The sentence a citation backs: its span's sentence, or its whole block."""
    if citation.start is None:
        return text.strip()
    before = text.rfind(". ", 0, citation.start)
    begin = 0 if before < 0 else before + 2
    stop = text.find(". ", citation.end or citation.start)
    return text[begin : stop + 1 if stop >= 0 else len(text)].strip()


def source_of(citation: Citation) -> str:
    where = citation.url or citation.title or f"document {citation.document_index}"
    if citation.kind == "page_location":
        where += f", page {citation.source_start}"
    quoted = f' — "{citation.cited_text.strip()}"' if citation.cited_text else ""
    return f"{where}{quoted}"


def show(message: AssistantMessage) -> None:
    # Anthropic answers in a text block per cited passage: the answer is their concatenation
    # (``message.text`` joins blocks with newlines).
    text = "".join(b.text for b in message.content if isinstance(b, TextContent))
    print(f"\n{message.provider} ({message.model}): {text}")
    for block in message.content:
        if isinstance(block, TextContent):
            for citation in block.citations:
                print(f"  - {sentence_of(block.text, citation)}\n      from {source_of(citation)}")


def documents() -> UserMessage:
    note = FileContent.from_bytes(NOTE.encode(), "text/plain", name="Tea notes")
    guide = FileContent.from_bytes(PDF, "application/pdf", name="Brewing guide")
    faq = FileContent.from_bytes(FAQ.encode(), "text/plain", name="Shop FAQ")
    ask = "How is green tea made and brewed, and when is shipping free? Cite the documents."
    return UserMessage.of(ask, files=[note, guide, faq])


async def main() -> None:
    spec = os.environ.get("TREADLE_MODEL")
    anthropic: Provider
    if spec:  # Anthropic cites documents it is asked to (cite_documents=True)
        options = {"cite_documents": True} if spec.startswith("anthropic:") else {}
        anthropic = get_provider(spec, **options)
    else:
        print("(offline: documented Anthropic and OpenAI responses replayed; no key, no network)")
        headers = {"content-type": "text/event-stream"}
        anthropic = WireFake.anthropic([Raw(anthropic_answer(), headers=headers)]).provider()
    research = Agent(anthropic)
    result = await research.run(documents())
    show(research.messages[-1])  # type: ignore[arg-type]
    if spec:
        return print(f"\n{result.text}")

    web = WireFake.responses([Raw(openai_answer(), headers={"content-type": "text/event-stream"})])
    news = Agent(web.provider("gpt-5"))
    await news.run("Was the 2026 first flush early, and what did it do to prices?")
    show(news.messages[-1])  # type: ignore[arg-type]


if __name__ == "__main__":
    anyio.run(main)

"""Each provider's citations read as :class:`~treadle.types.Citation` (docs/providers.md#citations).

What a provider did not say stays ``None``; a citation of a shape a provider does not
document is still kept, with what its common fields hold."""

from __future__ import annotations

from typing import Any

from ..types import Citation

# Anthropic: where each location kind puts the passage in its source, (start, end) fields.
_ANTHROPIC_SPANS = {
    "char_location": ("start_char_index", "end_char_index"),
    "page_location": ("start_page_number", "end_page_number"),
    "content_block_location": ("start_block_index", "end_block_index"),
    "search_result_location": ("start_block_index", "end_block_index"),
}


def from_anthropic(raw: dict[str, Any]) -> Citation:
    """One of Anthropic's text citations, any location kind. Each cites its whole text
    block, so ``start`` / ``end`` stay unset. A search result's ``source`` is its ``url``
    when it is an address, else its ``title`` when it has none."""
    kind = _text(raw.get("type")) or ""
    first, last = _ANTHROPIC_SPANS.get(kind, ("", ""))
    index = raw.get("search_result_index" if kind == "search_result_location" else "document_index")
    source = _text(raw.get("source"))
    address = source if source and "://" in source else None
    return Citation(
        kind=kind,
        url=_text(raw.get("url")) or address,
        title=_text(raw.get("title"))
        or _text(raw.get("document_title"))
        or (source if not address else None),
        cited_text=_text(raw.get("cited_text")),
        document_index=_int(index),
        file_id=_text(raw.get("file_id")),
        source_start=_int(raw.get(first)),
        source_end=_int(raw.get(last)),
    )


def from_openai(raw: dict[str, Any]) -> Citation | None:
    """One of the Responses API's annotations on an ``output_text`` part (``url_citation``,
    ``file_citation``, ``container_file_citation``), or a Chat Completions message's
    (``{"type": "url_citation", "url_citation": {...}}``). ``start_index`` / ``end_index``
    are in the part's text; a ``file_citation`` marks one point of it (``index``). None for
    an annotation that cites nothing (``file_path``: a link to a file the model made)."""
    kind = _text(raw.get("type")) or ""
    if kind == "file_path":
        return None
    nested = raw.get(kind)
    fields: dict[str, Any] = nested if isinstance(nested, dict) else raw  # Chat nests them
    point = _int(fields.get("index")) if kind == "file_citation" else None
    return Citation(
        kind=kind,
        url=_text(fields.get("url")),
        title=_text(fields.get("title")) or _text(fields.get("filename")),
        cited_text=_text(fields.get("content")),  # OpenRouter quotes the page
        file_id=_text(fields.get("file_id")),
        start=_int(fields.get("start_index")) if point is None else point,
        end=_int(fields.get("end_index")) if point is None else point,
    )


# Bedrock Converse: each location kind's key, and whether it names a document or a search result.
_BEDROCK_LOCATIONS = (
    "web",
    "documentChar",
    "documentPage",
    "documentChunk",
    "searchResultLocation",
)


def from_bedrock(raw: dict[str, Any]) -> Citation:
    """One of Bedrock Converse's citations (a ``citationsContent`` block's, or a streamed
    ``citation`` delta): ``kind`` is its location's key (``documentChar``, ``documentPage``,
    ``documentChunk``, ``searchResultLocation``, ``web``), which cites its whole block."""
    location = raw.get("location")
    location = location if isinstance(location, dict) else {}
    kind = next((key for key in _BEDROCK_LOCATIONS if isinstance(location.get(key), dict)), "")
    where: dict[str, Any] = location.get(kind) or {}
    index = where.get("searchResultIndex" if kind == "searchResultLocation" else "documentIndex")
    quoted = [p.get("text") for p in raw.get("sourceContent") or () if isinstance(p, dict)]
    source = _text(raw.get("source"))
    return Citation(
        kind=kind,
        url=_text(where.get("url")) or (source if source and "://" in source else None),
        title=_text(raw.get("title")) or _text(where.get("domain")),
        cited_text="".join(q for q in quoted if isinstance(q, str)) or None,
        document_index=_int(index),
        source_start=None if kind == "web" else _int(where.get("start")),
        source_end=None if kind == "web" else _int(where.get("end")),
    )


def from_gemini(metadata: dict[str, Any], text: str) -> list[Citation]:
    """A Gemini candidate's ``groundingMetadata``: a citation for each source (grounding
    chunk) of each supported segment of ``text``, the answer's text. Gemini counts the
    segment's ``startIndex`` / ``endIndex`` in UTF-8 bytes; they become characters here, and
    a segment whose bytes do not hold its own ``text`` is looked for by that text."""
    chunks = [c for c in metadata.get("groundingChunks") or () if isinstance(c, dict)]
    encoded = text.encode("utf-8")
    found: list[Citation] = []
    for support in metadata.get("groundingSupports") or ():
        segment = support.get("segment") if isinstance(support, dict) else None
        if not isinstance(segment, dict):
            continue
        start, end = _gemini_span(segment, encoded, text)
        for n in support.get("groundingChunkIndices") or ():
            chunk = chunks[n] if isinstance(n, int) and 0 <= n < len(chunks) else None
            kind = next((k for k, v in (chunk or {}).items() if isinstance(v, dict)), "")
            source: dict[str, Any] = (chunk or {}).get(kind) or {}
            found.append(
                Citation(
                    kind=kind,
                    url=_text(source.get("uri")),
                    title=_text(source.get("title")),
                    cited_text=_text(source.get("text")),  # a retrieved context's passage
                    start=start,
                    end=end,
                )
            )
    return found


def _gemini_span(
    segment: dict[str, Any], encoded: bytes, text: str
) -> tuple[int | None, int | None]:
    first = _int(segment.get("startIndex")) or 0  # proto3 JSON leaves a 0 out
    last = _int(segment.get("endIndex"))
    said = _text(segment.get("text"))
    if last is not None and 0 <= first <= last <= len(encoded):
        start = len(encoded[:first].decode("utf-8", "ignore"))
        end = len(encoded[:last].decode("utf-8", "ignore"))
        if said is None or text[start:end] == said:
            return start, end
    at = text.find(said) if said else -1
    return (at, at + len(said)) if said and at >= 0 else (None, None)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None

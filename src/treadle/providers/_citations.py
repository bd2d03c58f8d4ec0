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


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None

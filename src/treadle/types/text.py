"""Text at the boundaries: no lone surrogates (they poison JSON and stores), bounded size."""

from __future__ import annotations

TRUNCATION_MARKER = (
    "\n\n[... {omitted} characters of this result were cut to fit the tool-result limit "
    "({limit} characters) ...]\n\n"
)


def clean_text(text: str) -> str:
    """``text`` as valid Unicode: each lone surrogate (from a bad decode, ``\\udcff``) becomes
    U+FFFD. Cheap for the usual text, which is returned as it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def clip_text(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters: its head and tail around a marker that says
    how much went (the tail often holds the error or the summary)."""
    if len(text) <= limit:
        return text
    tail = limit // 5
    head = limit - tail
    marker = TRUNCATION_MARKER.format(omitted=len(text) - head - tail, limit=limit)
    return text[:head] + marker + text[len(text) - tail :]

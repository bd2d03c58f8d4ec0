"""Words: the tokenizer and stopwords the extensions share (private)."""

from __future__ import annotations

import re
import string

STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just let me more most my myself no nor not now of off on once only
    or other our ours ourselves out over own please same she should so some such than that
    the their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you
    your yours yourself yourselves
    """.split()
)
_SPLIT = re.compile(r"[\s" + re.escape(string.punctuation) + r"]+")


def words(text: str) -> list[str]:
    """Lowercase tokens of ``text``, split on whitespace and ASCII punctuation."""
    return [w for w in _SPLIT.split(text.lower()) if w]


def keywords(text: str, min_len: int = 3) -> list[str]:
    """``words`` without stopwords and short tokens, each once, in order."""
    seen: dict[str, None] = {}
    for w in words(text):
        if len(w) >= min_len and w not in STOPWORDS:
            seen.setdefault(w, None)
    return list(seen)

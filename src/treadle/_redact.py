"""Keeping credentials out of anything a URL or a traceback is shown in (reprs, events,
cassettes, the error info of a run)."""

from __future__ import annotations

import logging
import re
import traceback
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SECRET_PARAMS = frozenset(
    {"key", "api_key", "api-key", "apikey", "token", "access_token", "auth", "password"}
)
"""Query parameters whose values are credentials (compared case-insensitively)."""
REDACTED = "REDACTED"


def redact_url(url: str) -> str:
    """``url`` without ``user:password@`` and with credential query values replaced."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, REDACTED if k.lower() in SECRET_PARAMS else v) for k, v in pairs], safe="/:"
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class URLRedactor(logging.Filter):
    """Masks credentials in the URLs httpx logs (``HTTP Request: POST https://...?key=...``):
    a key that must travel in a base URL's query string never reaches a log file."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and any("?" in str(a) or "@" in str(a) for a in args):
            record.args = tuple(redact_url(str(a)) if "://" in str(a) else a for a in args)
        return True


_installed = False


def redact_http_logs() -> None:
    """Install :class:`URLRedactor` on the ``httpx`` logger, once per process (an adapter
    calls it when made; it only ever removes credentials from log lines)."""
    global _installed
    if not _installed:
        logging.getLogger("httpx").addFilter(URLRedactor())
        _installed = True


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)[^\s'\",]+")
_NAMED = re.compile(
    r"(?i)\b((?:x-)?api[_-]?key|access[_-]?token|token|password|secret|authorization)"
    r"(['\"]?\s*[:=]\s*['\"]?)[^\s'\",}&]+"
)
MAX_TRACEBACK_CHARS = 20_000


def scrub_text(text: str) -> str:
    """``text`` with the credentials that travel in text blanked out: a URL's
    ``user:password@`` and secret query values, ``Bearer``/``Basic`` tokens, and values
    named like a key (``api_key=...``, ``"authorization": "..."``)."""
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    text = _BEARER.sub(rf"\1\2{REDACTED}", text)
    return _NAMED.sub(rf"\1\2{REDACTED}", text)


def traceback_text(exc: BaseException) -> str:
    """``exc`` formatted as Python prints it (its causes too), scrubbed of credentials
    (:func:`scrub_text`) and cut to its last ``MAX_TRACEBACK_CHARS`` characters: the frames
    nearest the failure are the ones that say what went wrong."""
    text = scrub_text("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    if len(text) > MAX_TRACEBACK_CHARS:
        text = "[... earlier frames cut ...]\n" + text[-MAX_TRACEBACK_CHARS:]
    return text

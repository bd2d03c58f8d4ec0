"""Keeping credentials out of anything a URL is shown in (reprs, events, cassettes)."""

from __future__ import annotations

import logging
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

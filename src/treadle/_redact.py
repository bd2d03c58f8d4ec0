"""Keeping credentials out of anything a URL is shown in (reprs, events, cassettes)."""

from __future__ import annotations

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

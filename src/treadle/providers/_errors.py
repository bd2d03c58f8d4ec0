"""How HTTP adapters read failures: a response's status and body, or a transport error,
become a :class:`ProviderError` of the right kind, with the server's retry hint."""

from __future__ import annotations

import email.utils
import re
import socket
import time
from collections.abc import Mapping
from typing import Any

import httpx

from .._redact import redact_url
from ..errors import ConfigurationError
from .base import ErrorKind, ProviderError

# A request larger than the model's context, as OpenAI, Anthropic, Gemini, llama.cpp, vLLM,
# Ollama, LM Studio and Bedrock (its Claude and Nova models) word it in their error bodies.
_CONTEXT_OVERFLOW = re.compile(
    r"context[ _-]?(length|window)|maximum context|prompt is too long|too many tokens"
    r"|context_length_exceeded|exceed\w* (the )?(available |maximum |max )?(context|token)"
    r"|input is too long|reduce the length|token count .* exceeds|request too large for model"
    r"|longer than the maximum model length|greater than the context length"
    r"|context (the )?overflows|context size has been exceeded"
    r"|exceed_context_size|context_exceeded"
    r"|too many total text bytes|input tokens exceeded",
    re.IGNORECASE,
)
_TRY_AGAIN = re.compile(r"(?:try again|retry) in (\d+(?:\.\d+)?)\s*(ms|s|sec|seconds?)\b", re.I)
_RETRY_DELAY = re.compile(r"^(\d+(?:\.\d+)?)s$")


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    value = (headers.get("retry-after") or "").strip()
    for number, scale in ((headers.get("retry-after-ms"), 1000), (value, 1)):
        try:
            return max(0.0, float(number or "") / scale)
        except ValueError:
            pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _hint_from_body(message: str, payload: Any) -> float | None:
    """A provider's own retry hint: "try again in 125ms", or Gemini's RetryInfo.retryDelay."""
    match = _TRY_AGAIN.search(message)
    if match:
        amount = float(match.group(1))
        return amount / 1000 if match.group(2).lower() == "ms" else amount
    error = payload.get("error") if isinstance(payload, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for detail in details if isinstance(details, list) else ():
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and (m := _RETRY_DELAY.match(delay)):
            return float(m.group(1))
    return None


def error_message(payload: Any, fallback: str) -> tuple[str, str]:
    """(message, type/code) from the error shapes providers use."""
    if isinstance(payload, list) and payload:
        payload = payload[0]
    if not isinstance(payload, dict):
        return fallback, ""
    error = payload.get("error", payload)
    if isinstance(error, str):
        return error, ""
    if not isinstance(error, dict):
        return fallback, ""
    message = error.get("message") or fallback
    prompt, window = error.get("n_prompt_tokens"), error.get("n_ctx")
    if isinstance(prompt, int) and isinstance(window, int) and str(prompt) not in message:
        # llama.cpp's sizes as fields only: named in the message, so calibration sees them
        message = f"{message} (request: {prompt} tokens, context size: {window} tokens)"
    metadata = error.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("raw"), str):
        message = f"{message}: {metadata['raw']}"
    codes = [error.get(key) for key in ("type", "code", "status")]
    return str(message), " ".join(str(c) for c in codes if c not in (None, ""))


def filtered_categories(payload: Any) -> list[str] | None:
    """The categories a content filter flagged, from Azure OpenAI's refusal body
    (``error.innererror.content_filter_result``) or a choice's ``content_filter_results``;
    None when ``payload`` is no such refusal."""
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        inner = payload["error"].get("innererror")
        payload = inner if isinstance(inner, dict) else {}
    results = None
    if isinstance(payload, dict):
        results = payload.get("content_filter_result") or payload.get("content_filter_results")
    if not isinstance(results, dict):
        return None
    return [
        name
        for name, result in results.items()
        if isinstance(result, dict) and (result.get("filtered") or result.get("detected"))
    ]


def filter_message(message: str, categories: list[str] | None) -> str:
    """``message`` naming what the filter flagged, once."""
    if not categories:
        return message
    named = ", ".join(categories)
    return message if named in message else f"{message} (flagged: {named})"


def classify(
    status: int,
    payload: Any,
    *,
    provider: str,
    headers: Mapping[str, str] | None = None,
    fallback: str = "",
) -> ProviderError:
    """Map an HTTP status and error body to a :class:`ProviderError`."""
    message, code = error_message(payload, fallback or f"HTTP {status}")
    lowered = code.lower()
    kind: ErrorKind
    if status == 429 or "rate_limit" in lowered or "resource_exhausted" in lowered:
        kind = "rate_limit"
    elif status == 529 or "overloaded" in lowered or "overloaded" in message.lower():
        kind = "overloaded"
    elif status in (401, 403) or "authentication" in lowered or "permission" in lowered:
        kind = "auth"
    elif "content_filter" in lowered or filtered_categories(payload) is not None:
        kind = "content_filter"
        message = filter_message(message, filtered_categories(payload))
    elif status == 408 or status == 504:
        kind = "timeout"
    elif _CONTEXT_OVERFLOW.search(message) or _CONTEXT_OVERFLOW.search(code) or status == 413:
        kind = "context_overflow"
    elif status >= 500 or any(c in lowered for c in ("api_error", "server_error", "internal")):
        kind = "server"
    else:
        kind = "bad_request"
    retry_after = parse_retry_after(headers) if headers else None
    if retry_after is None and kind in ("rate_limit", "overloaded", "server"):
        retry_after = _hint_from_body(message, payload)
    return ProviderError(
        kind, message, status_code=status or None, retry_after=retry_after, provider=provider
    )


# What a request sent on a kept-alive connection the server had closed fails with, before
# any response byte: "Server disconnected without sending a response", a reset, a broken pipe.
_STALE_CONNECTION = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)

_LOOPBACK = {"localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0"}


def _refused(exc: BaseException, depth: int = 0) -> bool:
    """Whether ``exc``, its cause or its group (trio's connect attempts) is a refusal."""
    seen: BaseException | None = exc
    while seen is not None and depth < 20:
        if isinstance(seen, ConnectionRefusedError) or "refused" in str(seen).lower():
            return True
        group = getattr(seen, "exceptions", None)  # ExceptionGroup (trio's happy eyeballs)
        if isinstance(group, tuple) and any(_refused(e, depth + 1) for e in group):
            return True
        seen = seen.__cause__ or seen.__context__
        depth += 1
    return False


def _no_such_host(exc: BaseException, depth: int = 0) -> bool:
    """Whether ``exc`` (or its cause, or its group) says the host name does not exist:
    ``EAI_NONAME`` / ``EAI_NODATA``, not the temporary ``EAI_AGAIN``."""
    seen: BaseException | None = exc
    while seen is not None and depth < 20:
        if isinstance(seen, socket.gaierror) and seen.errno in _NO_SUCH_HOST:
            return True
        text = str(seen).lower()
        if "name or service not known" in text or "nodename nor servname" in text:
            return True
        group = getattr(seen, "exceptions", None)
        if isinstance(group, tuple) and any(_no_such_host(e, depth + 1) for e in group):
            return True
        seen = seen.__cause__ or seen.__context__
        depth += 1
    return False


_NO_SUCH_HOST = {
    code
    for code in (getattr(socket, "EAI_NONAME", None), getattr(socket, "EAI_NODATA", None))
    if code is not None
}


def check_base_url(base_url: str) -> None:
    """Fail at construction, naming the fix, for a ``base_url`` no request could go to."""
    try:
        url = httpx.URL(base_url)
        if url.scheme in ("http", "https") and url.host:
            return
    except httpx.InvalidURL:
        pass
    shown = redact_url(base_url)
    guess = f"; did you mean 'http://{shown}'?" if "://" not in base_url and shown else ""
    raise ConfigurationError(
        f"base_url {shown!r} is not an http:// or https:// URL with a host: give the full "
        f"address, e.g. 'https://api.openai.com/v1' or 'http://localhost:8000/v1'{guess}"
    )


# Failures of the request itself (its URL, a header value): configuration errors, not retried.
_UNSENDABLE = (httpx.UnsupportedProtocol, httpx.InvalidURL, httpx.LocalProtocolError)


def transport_error(
    exc: httpx.TransportError | httpx.InvalidURL, provider: str, base_url: str = "", hint: str = ""
) -> ProviderError:
    """A connection-level failure, naming the server and what to check (the exception's own
    text, never the request's); a refused connection to this machine is ``unreachable``."""
    where = redact_url(base_url) if base_url else "the server"
    if isinstance(exc, _UNSENDABLE):  # the text may quote a header (the key): not kept
        message = (
            f"the request to {where} could not be sent ({type(exc).__name__}): a configuration "
            "error, not retried; check base_url (http:// or https://) and the api_key and "
            "headers for stray characters such as a newline"
        )
        return ProviderError("bad_request", message, provider=provider)
    kind: ErrorKind = "timeout" if isinstance(exc, httpx.TimeoutException) else "network"
    detail = str(exc) or type(exc).__name__
    host = httpx.URL(base_url).host if base_url else ""
    if isinstance(exc, httpx.ConnectError) and host in _LOOPBACK and _refused(exc):
        kind = "unreachable"
        check = hint or "is the server running, and is base_url right?"
        message = f"nothing is listening at {where} (connection refused): {check}"
    elif isinstance(exc, httpx.ConnectError) and _no_such_host(exc):
        kind = "unreachable"  # retrying a name that does not resolve only waits longer
        check = hint or "check the host name in base_url (or the model string)"
        message = f"the host of {where} does not exist (DNS: {detail}); {check}"
    elif isinstance(exc, httpx.ConnectError):
        check = hint or "check base_url, your network and any proxy settings"
        message = f"could not connect to {where} ({type(exc).__name__}: {detail}); {check}"
    else:
        message = f"{type(exc).__name__} talking to {where}: {detail}"
    return ProviderError(kind, message, provider=provider)

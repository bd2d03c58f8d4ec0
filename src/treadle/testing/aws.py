"""``SigV4Check``: a Bedrock wire fake behind the checks AWS makes on every request.

Each request's AWS Signature Version 4 is recomputed with botocore from the request as it
arrived (its method, URL, the headers it says it signed, its body) and a secret the test
knows; a Bedrock API key (``Authorization: Bearer``) is compared with the keys given. A
request that fails is answered as AWS answers it (HTTP 403 with the exception's name in
``x-amzn-ErrorType`` and a ``{"message"}`` body) and never reaches the fake's script::

    fake = SigV4Check(WireFake.bedrock(["Hello!"]), credentials={"AKIDTEST": "secret"})
    async with serve(fake) as url:           # or client=httpx.AsyncClient(transport=fake)
        ...                                  # boto3, or treadle's Bedrock adapter

It needs botocore (``pip install 'treadle[bedrock]'``), imported on the first signed
request.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Protocol, Union

import httpx

from .exchange import RecordedRequest, Reply, ReplyStream

__all__ = ["SigV4Check"]

_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<credential>[^,\s]+),\s*SignedHeaders=(?P<signed>[^,\s]+)"
    r",\s*Signature=(?P<signature>[0-9a-f]{64})$"
)
_SKEW = timedelta(minutes=15)  # how far a request's date may be from the server's clock
_NAMESPACE = ":http://internal.amazon.com/coral/com.amazon.coral.service/"
_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check "
    "your AWS Secret Access Key and signing method. Consult the service documentation for "
    "details."
)
_BAD_TOKEN = "The security token included in the request is invalid."
Secret = Union[str, tuple[str, str]]  # a secret key, or (secret key, session token)


class Answerer(Protocol):
    async def respond(self, request: RecordedRequest) -> Reply: ...


def _stamp(when: datetime) -> str:
    return when.strftime("%Y%m%dT%H%M%SZ")


def error_reply(status: int, name: str, message: str) -> Reply:
    """An AWS error response: the exception's name in ``x-amzn-ErrorType``, its message."""
    headers = [
        ("content-type", "application/json"),
        ("x-amzn-errortype", name + _NAMESPACE),
        ("x-amzn-requestid", "00000000-0000-4000-8000-000000000403"),
    ]
    body = json.dumps({"message": message}).encode()
    return Reply(status, headers, [body])


class SigV4Check(httpx.AsyncBaseTransport):
    """Answers through ``fake`` only the requests AWS would let through (module docs).

    ``credentials`` maps access key ids to their secret key, or to ``(secret, session token)``
    for temporary credentials (the ``x-amz-security-token`` must match); ``api_keys`` are
    the Bedrock API keys accepted as bearer tokens. A signature must be scoped to ``region``
    and ``service`` and dated within 15 minutes of ``clock()`` (default: now, UTC).
    Every refusal is kept in :attr:`rejected` as ``(request, exception name)``."""

    def __init__(
        self,
        fake: Answerer,
        *,
        credentials: Mapping[str, Secret] | None = None,
        api_keys: Iterable[str] = (),
        region: str = "us-east-1",
        service: str = "bedrock",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.fake = fake
        self.credentials = dict(credentials or {})
        self.api_keys = frozenset(api_keys)
        self.region = region
        self.service = service
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self.rejected: list[tuple[RecordedRequest, str]] = []
        self.accepted: list[RecordedRequest] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the secrets
        return (
            f"SigV4Check({self.fake!r}, region={self.region!r}, keys={len(self.credentials)}, "
            f"accepted={len(self.accepted)}, rejected={len(self.rejected)})"
        )

    async def respond(self, request: RecordedRequest) -> Reply:
        """The fake's answer, or AWS's refusal (also what :func:`serve` calls)."""
        refusal = self.refusal(request)
        with self._lock:
            if refusal is not None:
                self.rejected.append((request, refusal[1]))
            else:
                self.accepted.append(request)
        if refusal is not None:
            return error_reply(*refusal)
        return await self.fake.respond(request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        recorded = RecordedRequest.build(
            request.method, str(request.url), request.headers.multi_items(), body
        )
        reply = await self.respond(recorded)
        return httpx.Response(
            reply.status, headers=reply.headers, stream=ReplyStream(reply), request=request
        )

    def refusal(self, request: RecordedRequest) -> tuple[int, str, str] | None:
        """``(status, exception, message)`` when AWS would refuse ``request``, else None."""
        given = request.headers.get("authorization", "")
        if given.startswith("Bearer "):
            key = given.removeprefix("Bearer ").strip()
            if any(hmac.compare_digest(key, known) for known in self.api_keys):
                return None
            return 403, "UnrecognizedClientException", _BAD_TOKEN
        if not given:
            return 403, "MissingAuthenticationTokenException", "Missing Authentication Token"
        parsed = _AUTH.match(given)
        if parsed is None:
            message = f"Authorization header is malformed: {given[:40]}"
            return 400, "IncompleteSignatureException", message
        key, date, region, service, terminal = (parsed["credential"].split("/") + [""] * 5)[:5]
        signed = parsed["signed"].split(";")
        amz_date = request.headers.get("x-amz-date", "")
        missing = [name for name in ("host", "x-amz-date") if name not in signed]
        if missing or terminal != "aws4_request" or not amz_date.startswith(date):
            return 400, "IncompleteSignatureException", "The request signature is incomplete."
        if region != self.region:
            message = "Credential should be scoped to a valid region."
            return 403, "InvalidSignatureException", message
        if service != self.service:
            message = f"Credential should be scoped to correct service: '{self.service}'."
            return 403, "InvalidSignatureException", message
        known = self.credentials.get(key)
        if known is None:
            return 403, "UnrecognizedClientException", _BAD_TOKEN
        secret, token = (known, None) if isinstance(known, str) else known
        if token is not None and not hmac.compare_digest(
            request.headers.get("x-amz-security-token", ""), token
        ):
            return 403, "UnrecognizedClientException", _BAD_TOKEN
        expired = self._expired(amz_date)
        if expired is not None:
            return 403, "InvalidSignatureException", expired
        content_hash = request.headers.get("x-amz-content-sha256")
        if content_hash not in (None, "UNSIGNED-PAYLOAD"):
            if content_hash != hashlib.sha256(request.body).hexdigest():
                return 400, "InvalidSignatureException", "The provided body hash does not match."
        expected = self._signature(request, signed, amz_date, key, secret, token)
        if expected is None:
            return 400, "IncompleteSignatureException", "A signed header is missing."
        if not hmac.compare_digest(expected, parsed["signature"]):
            return 403, "InvalidSignatureException", _MISMATCH
        return None

    def _expired(self, amz_date: str) -> str | None:
        try:
            when = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
        except ValueError:
            return f"Date must be in ISO-8601 'basic format'. Got '{amz_date}'."
        now = self.clock()
        if when < now - _SKEW:
            early, at = _stamp(now - _SKEW), _stamp(now)
            return f"Signature expired: {amz_date} is now earlier than {early} ({at} - 15 min.)"
        if when > now + _SKEW:
            late, at = _stamp(now + _SKEW), _stamp(now)
            return (
                f"Signature not yet current: {amz_date} is still later than {late} ({at} + 15 min.)"
            )
        return None

    def _signature(
        self,
        request: RecordedRequest,
        signed: list[str],
        amz_date: str,
        key: str,
        secret: str,
        token: str | None,
    ) -> str | None:
        """The signature AWS computes: botocore's SigV4 over the headers the client signed."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        headers: dict[str, str] = {}
        for name in signed:
            values = request.headers.get_list(name)
            if not values:
                return None
            headers[name] = ",".join(values)
        aws = AWSRequest(method=request.method, url=request.url, data=request.body, headers=headers)
        aws.context["timestamp"] = amz_date
        signer = SigV4Auth(Credentials(key, secret, token), self.service, self.region)
        canonical = signer.canonical_request(aws)
        return str(signer.signature(signer.string_to_sign(aws, canonical), aws))

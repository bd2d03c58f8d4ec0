"""AWS credentials for the Bedrock adapter: requests signed with SigV4 through botocore's
credential chain (the optional extra ``treadle[bedrock]``), the region and the endpoint as
boto3 finds them. botocore is imported only when a signature is asked for.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import AsyncGenerator, Generator
from typing import Any

import anyio.to_thread
import httpx

from ..errors import ConfigurationError
from .base import ProviderError

BEARER_VARIABLE = "AWS_BEARER_TOKEN_BEDROCK"
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
# boto3's endpoint variables: the service's own (its id "Bedrock Runtime"), then the global.
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "AWS_ENDPOINT_URL")
_INSTALL = (
    "SigV4 signing needs botocore: pip install 'treadle[bedrock]' (or use a Bedrock API key: "
    f"set {BEARER_VARIABLE} or pass api_key=)"
)
# Headers a signature covers: these and every x-amz-* one. Not the ones a proxy or httpx
# may change on the way (connection, accept-encoding, user-agent, content-length).
_SIGNED = ("host", "content-type")


def _botocore() -> Any:
    try:
        import botocore.session
    except ImportError:
        raise ConfigurationError(_INSTALL) from None
    return botocore


def env_region() -> str | None:
    """The region in ``AWS_REGION``, else ``AWS_DEFAULT_REGION`` (boto3's order)."""
    return next(
        (os.environ[n].strip() for n in REGION_VARIABLES if os.environ.get(n, "").strip()), None
    )


def env_endpoint() -> str | None:
    """An endpoint set for Bedrock Runtime, or for every service, as boto3 reads them (none
    when ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` is true)."""
    if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").strip().lower() == "true":
        return None
    return next(
        (os.environ[n].strip() for n in ENDPOINT_VARIABLES if os.environ.get(n, "").strip()), None
    )


def bedrock_endpoint(region: str) -> str:
    """Bedrock Runtime's public endpoint in ``region`` (China's regions have their own domain)."""
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://bedrock-runtime.{region}.{domain}"


class AWSSigV4(httpx.Auth):
    """An ``httpx.Auth`` that signs each request with AWS Signature Version 4.

    Credentials come from botocore's standard chain, as boto3 finds them: the environment
    (``AWS_ACCESS_KEY_ID`` …), a shared profile (``profile=``, else ``AWS_PROFILE``) with
    SSO, assumed roles or a credential process, web identity, then the container and
    instance roles. They are looked up on the first request, in a worker thread (the chain
    may read files and call a metadata endpoint), and botocore refreshes temporary ones
    before they expire (a refresh runs in a worker thread too). Each request is signed when
    it is sent, so a retry is signed anew. ``session=`` takes a ``botocore.session.Session``
    of your own; ``region`` defaults to the environment's, then the profile's.
    """

    requires_request_body = True  # the signature covers the body's hash

    def __init__(
        self,
        *,
        region: str | None = None,
        service: str = "bedrock",
        profile: str | None = None,
        session: Any = None,
    ) -> None:
        botocore = _botocore()
        self._session = (
            session if session is not None else botocore.session.Session(profile=profile)
        )
        self.profile = profile
        self.service = service
        found = region or env_region() or self._session.get_config_variable("region")
        if not found:
            raise ConfigurationError(
                "no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION), give the profile a "
                "region, or pass region="
            )
        self.region: str = found
        self._credentials: Any = None
        self._lock = threading.Lock()
        self._recent: deque[str] = deque(maxlen=6)  # secret keys and session tokens used

    def __repr__(self) -> str:
        return (
            f"AWSSigV4(region={self.region!r}, service={self.service!r}, profile={self.profile!r})"
        )

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secret keys and session tokens used lately (blanked out of errors)."""
        return tuple(self._recent)

    def _load(self) -> Any:
        """The current credentials, frozen (may do I/O: the chain, a refresh)."""
        with self._lock:
            if self._credentials is None:
                try:
                    credentials = self._session.get_credentials()
                except Exception as exc:  # a profile that does not exist, an SSO login to redo
                    message = f"AWS credentials could not be loaded: {type(exc).__name__}: {exc}"
                    raise ProviderError("auth", message, provider=self.service) from None
                if credentials is None:
                    raise ProviderError(
                        "auth",
                        "no AWS credentials found: set AWS_ACCESS_KEY_ID and "
                        "AWS_SECRET_ACCESS_KEY, name a profile (AWS_PROFILE, profile=), run "
                        f"on a role, or use a Bedrock API key ({BEARER_VARIABLE})",
                        provider=self.service,
                    )
                self._credentials = credentials
        try:
            frozen = self._credentials.get_frozen_credentials()
        except Exception as exc:  # a refresh that failed (an expired SSO session …)
            message = f"AWS credentials could not be refreshed: {type(exc).__name__}: {exc}"
            raise ProviderError("auth", message, provider=self.service) from None
        for secret in (frozen.secret_key, frozen.token):
            if secret and secret not in self._recent:
                self._recent.append(secret)
        return frozen

    def _static(self) -> bool:
        """Whether the credentials are loaded and never refresh (no I/O to get them)."""
        refreshable = _botocore().credentials.RefreshableCredentials
        return self._credentials is not None and not isinstance(self._credentials, refreshable)

    def sign(self, request: httpx.Request, credentials: Any) -> None:
        """Sign ``request`` in place with frozen ``credentials`` (botocore's ``SigV4Auth``)."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        headers = {
            name: value
            for name, value in request.headers.items()
            if name in _SIGNED or name.startswith("x-amz-")
        }
        aws = AWSRequest(
            method=request.method, url=str(request.url), data=request.content, headers=headers
        )
        SigV4Auth(credentials, self.service, self.region).add_auth(aws)
        for name in ("authorization", "x-amz-date", "x-amz-security-token"):
            value = aws.headers.get(name)
            if value:
                request.headers[name] = value

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        frozen = self._load() if self._static() else await anyio.to_thread.run_sync(self._load)
        self.sign(request, frozen)
        yield request

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        self.sign(request, self._load())
        yield request

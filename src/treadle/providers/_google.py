"""Google OAuth access tokens from google-auth credentials, as an ``httpx.Auth``.

Application Default Credentials (a service-account file in ``GOOGLE_APPLICATION_CREDENTIALS``,
``gcloud auth application-default login``, workload identity and the metadata server) are
found by google-auth (the ``treadle[vertex]`` extra, imported on first use). Its calls block
(files, the token endpoint), so they run in a worker thread and never on the event loop; a
token is refreshed once less than ``refresh_margin_s`` of its life is left, so no request
carries one that expires on the way.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import AsyncGenerator, Generator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import anyio.to_thread
import httpx

from ..errors import ConfigurationError
from .base import ErrorKind, ProviderError

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
REFRESH_MARGIN_S = 300.0
_SETUP = (
    "run `gcloud auth application-default login`, set GOOGLE_APPLICATION_CREDENTIALS to a "
    "service-account key file, or pass credentials="
)


def _google_auth() -> Any:
    try:
        import google.auth
        import google.auth.credentials
        import google.auth.exceptions
        import google.auth.transport.requests
    except ImportError as exc:
        raise ConfigurationError(
            f"Google credentials need google-auth ({exc}): pip install 'treadle[vertex]'"
        ) from None
    return google.auth


class GoogleAuth(httpx.Auth):
    """Google credentials on each request: ``Authorization: Bearer <access token>`` (and
    ``x-goog-user-project`` when the credentials name a quota project).

    ``credentials``: a google-auth ``Credentials`` object (service account, user, external
    account …); ``None`` finds Application Default Credentials on first use. ``scopes`` are
    applied to credentials that need them. The token is refreshed, in a worker thread, when
    less than ``refresh_margin_s`` seconds of it are left; a ``401`` refreshes it at once and
    sends the request again. Await :meth:`token` for the token itself (a token provider for
    ``auth=`` of any adapter), :meth:`project` for the project the credentials belong to."""

    def __init__(
        self,
        credentials: Any = None,
        *,
        scopes: Sequence[str] = (CLOUD_PLATFORM,),
        refresh_margin_s: float = REFRESH_MARGIN_S,
    ) -> None:
        if isinstance(credentials, str):
            raise ConfigurationError(
                "GoogleAuth(credentials=...) takes a google-auth Credentials object, not a "
                "str: load a key file with google.oauth2.service_account.Credentials"
                ".from_service_account_file(path), or set GOOGLE_APPLICATION_CREDENTIALS"
            )
        self._credentials = credentials
        self._scopes = list(scopes)
        self._margin = timedelta(seconds=refresh_margin_s)
        self._project: str | None = None
        self._loaded = False
        self._lock = threading.Lock()  # one refresh at a time, whichever thread or loop asks
        self._recent: deque[str] = deque(maxlen=4)
        self._transport: Any = None  # google-auth's HTTP transport, made once, used locked

    def __repr__(self) -> str:
        kind = "default" if self._credentials is None else type(self._credentials).__name__
        return f"GoogleAuth(credentials={kind})"

    @property
    def secrets(self) -> tuple[str, ...]:
        """The tokens sent lately: an adapter blanks them out of the errors it raises."""
        return tuple(self._recent)

    async def token(self) -> str:
        """A token with more than ``refresh_margin_s`` left, refreshed first if needed."""
        credentials = self._credentials
        if self._loaded and credentials is not None and self._fresh(credentials):
            return self._sent(credentials.token)
        return await anyio.to_thread.run_sync(self._token_blocking, abandon_on_cancel=True)

    async def __call__(self) -> str:
        return await self.token()

    async def project(self) -> str | None:
        """The project of the credentials (Application Default Credentials name one)."""
        if not self._loaded:
            await anyio.to_thread.run_sync(self._load, abandon_on_cancel=True)
        return self._project

    # ---- blocking parts: in a worker thread (or a sync client's own thread) ----

    def _load(self) -> Any:
        with self._lock:
            return self._load_locked()

    def _load_locked(self) -> Any:
        if self._loaded:
            return self._credentials
        auth = _google_auth()
        try:
            if self._credentials is None:
                credentials, project = auth.default(scopes=self._scopes)
                self._project = project or None
            else:
                credentials = self._credentials
                self._project = getattr(credentials, "project_id", None) or None
            credentials = auth.credentials.with_scopes_if_required(credentials, self._scopes)
        except auth.exceptions.DefaultCredentialsError as exc:
            raise ProviderError("auth", f"no Google credentials found ({exc}): {_SETUP}") from None
        self._credentials = credentials
        self._loaded = True
        return credentials

    def _fresh(self, credentials: Any) -> bool:
        token = getattr(credentials, "token", None)
        if not token:
            return False
        expiry = getattr(credentials, "expiry", None)  # naive UTC, as google-auth keeps it
        if expiry is None:
            return True
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        return bool(expiry - self._margin > now)

    def _token_blocking(self, force: bool = False, stale: str | None = None) -> str:
        with self._lock:
            credentials = self._load_locked()
            current = getattr(credentials, "token", None)
            # Another request may have refreshed it while this one waited for the lock.
            if force and current and current != stale and self._fresh(credentials):
                force = False
            if force or not self._fresh(credentials):
                self._refresh(credentials)
            return self._sent(credentials.token)

    def _refresh(self, credentials: Any) -> None:
        auth = _google_auth()
        try:
            if self._transport is None:
                self._transport = auth.transport.requests.Request()
            credentials.refresh(self._transport)
        except auth.exceptions.RefreshError as exc:
            kind: ErrorKind = "server" if getattr(exc, "retryable", False) else "auth"
            raise ProviderError(kind, f"Google refused to refresh the credentials: {exc}") from None
        except auth.exceptions.TransportError as exc:
            raise ProviderError("network", f"Google's token endpoint: {exc}") from None

    def _sent(self, token: object) -> str:
        if not isinstance(token, str) or not token:
            raise ProviderError("auth", "the Google credentials gave no access token")
        if token not in self._recent:
            self._recent.append(token)
        return token

    # ---- httpx ----

    def _put(self, request: httpx.Request, token: str) -> None:
        request.headers["authorization"] = f"Bearer {token}"
        quota = getattr(self._credentials, "quota_project_id", None)
        if isinstance(quota, str) and quota and "x-goog-user-project" not in request.headers:
            request.headers["x-goog-user-project"] = quota

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        token = await self.token()
        self._put(request, token)
        response = yield request
        if response.status_code == 401:  # revoked, or the clocks disagree: a new one, once
            fresh = await anyio.to_thread.run_sync(
                self._token_blocking, True, token, abandon_on_cancel=True
            )
            if fresh != token:
                self._put(request, fresh)
                yield request

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        token = self._token_blocking()
        self._put(request, token)
        response = yield request
        if response.status_code == 401:
            fresh = self._token_blocking(True, token)
            if fresh != token:
                self._put(request, fresh)
                yield request

"""Credentials per request: an ``httpx.Auth``, or a token provider wrapped as one.

Cloud accounts authenticate with short-lived tokens (Microsoft Entra ID, Google OAuth, AWS
roles) that a credential library refreshes. An adapter takes ``auth=`` and hands it to
httpx for every request, so a refreshed token is used at once and the adapter never keeps
one. Tokens are secrets: never in a repr, and blanked out of provider errors.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from typing import Union

import httpx

from ..errors import UsageError
from .base import ProviderError

TokenProvider = Callable[[], Union[str, Awaitable[str]]]
"""A callable returning a bearer token, sync or async, asked before each request (the
openai SDK's ``azure_ad_token_provider`` shape: azure-identity's
``get_bearer_token_provider(DefaultAzureCredential(), scope)`` is one). It owns caching and
refresh; treadle asks again once if the server answers 401."""

Credentials = Union[httpx.Auth, TokenProvider]


class BearerToken(httpx.Auth):
    """An ``httpx.Auth`` that puts a provider's token in a header of each request.

    ``header`` and ``prefix`` default to ``Authorization: Bearer <token>``. On a 401 the
    provider is asked once more and the request sent again if the token changed (it had
    expired between the provider's check and the server's)."""

    def __init__(
        self, provider: TokenProvider, *, header: str = "authorization", prefix: str = "Bearer "
    ) -> None:
        if not callable(provider):
            raise UsageError(
                f"a token provider must be a callable returning a token, got "
                f"{type(provider).__name__}; pass auth=lambda: token, or an httpx.Auth"
            )
        self._provider = provider
        self._header = header
        self._prefix = prefix
        self._recent: deque[str] = deque(maxlen=4)  # to blank out of errors (``secrets``)

    def __repr__(self) -> str:
        return f"BearerToken(header={self._header!r})"

    @property
    def secrets(self) -> tuple[str, ...]:
        """The tokens sent lately: an adapter blanks them out of the errors it raises."""
        return tuple(self._recent)

    def _checked(self, token: object) -> str:
        if not isinstance(token, str) or not token:
            raise ProviderError(
                "auth",
                f"the token provider returned {type(token).__name__}, not a non-empty str",
            )
        if token not in self._recent:
            self._recent.append(token)
        return token

    async def _token(self) -> str:
        try:
            token = self._provider()
            if inspect.isawaitable(token):
                token = await token
        except ProviderError:
            raise
        except Exception as exc:  # a credential library's own failure, said as auth
            raise ProviderError(
                "auth", f"the token provider raised {type(exc).__name__}: {exc}"
            ) from exc
        return self._checked(token)

    def _put(self, request: httpx.Request, token: str) -> None:
        request.headers[self._header] = self._prefix + token

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        token = await self._token()
        self._put(request, token)
        response = yield request
        if response.status_code == 401:
            fresh = await self._token()
            if fresh != token:
                self._put(request, fresh)
                yield request

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        token = self._provider()
        if inspect.isawaitable(token):
            close = getattr(token, "close", None)
            if close is not None:
                close()  # never awaited: no "coroutine was never awaited" warning
            raise UsageError("an async token provider needs an async client")
        self._put(request, self._checked(token))
        yield request


def as_auth(credentials: Credentials | None) -> httpx.Auth | None:
    """``auth=`` as httpx takes it: an ``httpx.Auth`` as is, a callable as a bearer token."""
    if credentials is None or isinstance(credentials, httpx.Auth):
        return credentials
    if isinstance(credentials, str):
        raise UsageError(
            "auth= takes an httpx.Auth or a callable returning a token, not a str; "
            "a fixed key goes in api_key="
        )
    return BearerToken(credentials)


def auth_secrets(auth: httpx.Auth | None) -> tuple[str, ...]:
    """What an adapter blanks out of errors for ``auth``: the tokens a ``BearerToken``
    sent, or the ``secrets`` an auth of the user's own declares."""
    found = getattr(auth, "secrets", ())
    return tuple(s for s in found if isinstance(s, str))

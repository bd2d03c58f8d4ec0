"""The web app's front door: the guard every treadle HTTP surface has (``treadle.ui._guard``:
peer, ``Host``, token, ``Origin``, body limits), and secrets from the server's environment
masked in every response (with as many ``*``, so lengths hold)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, MutableMapping
from typing import Any

from .._guard import ASGIApp, HTTPGuard, Message, Receive, Scope, Send

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)


def environment_secrets(environ: MutableMapping[str, str] | None = None) -> list[bytes]:
    """Values of the environment variables named like credentials (``OPENAI_API_KEY``,
    ``GITHUB_TOKEN`` ...), longest first; short values (under 8 characters) are left out,
    since they would match ordinary text."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v.strip()) >= 8}
    return sorted((v.encode() for v in values), key=len, reverse=True)


class Guard(HTTPGuard):
    """The shared guard (see :class:`treadle.ui._guard.HTTPGuard` for ``token``,
    ``origins``, ``trusted_hosts`` and the body limits), plus the mask on every response."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        secrets: Iterable[bytes] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(app, **options)
        self.state: Any = None  # the app's state (the web app sets it)
        token = self.token
        self.secrets = list(environment_secrets() if secrets is None else secrets)
        if token:
            self.secrets = [s for s in self.secrets if s != token.encode()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        admitted = await self.admit(scope, receive, send)
        if admitted is None:
            return
        receive = admitted
        await self.app(scope, receive, self._scrubbing(send))

    def _scrubbing(self, send: Send) -> Send:
        if not self.secrets:
            return send
        secrets = self.secrets

        async def scrubbed(message: Message) -> None:
            if message["type"] == "http.response.body":
                body = message.get("body", b"")
                for secret in secrets:
                    if secret in body:
                        body = body.replace(secret, b"*" * len(secret))  # same length
                message["body"] = body
            await send(message)

        return scrubbed

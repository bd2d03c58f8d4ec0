"""The web app's front door: the guard every treadle HTTP surface has (``treadle.ui._guard``:
peer, ``Host``, token, ``Origin``, body limits), and secrets from the server's environment
masked in every data response, on the stream (``treadle.ui._mask``: any spelling, split
between chunks too; with as many ``*``, so lengths hold; the page's own assets are left as
they are)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, MutableMapping
from typing import Any

from .._guard import ASGIApp, HTTPGuard, Receive, Scope, Send
from .._mask import Secrets, masking_send

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)


def environment_secrets(environ: MutableMapping[str, str] | None = None) -> list[bytes]:
    """Values of the environment variables named like credentials (``OPENAI_API_KEY``,
    ``GITHUB_TOKEN`` ...), longest first; short values (under 8 characters) are left out,
    since they would match ordinary text."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v.strip()) >= 8}
    return sorted((v.encode("utf-8", "surrogateescape") for v in values), key=len, reverse=True)


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
        self.mask = Secrets(self.secrets)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        admitted = await self.admit(scope, receive, send)
        if admitted is None:
            return
        receive = admitted
        await self.app(scope, receive, masking_send(send, self.mask))

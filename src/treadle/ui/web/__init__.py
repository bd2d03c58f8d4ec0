"""A local web app for any agent: chat, a live run inspector, sessions (extra ``web``).

``web_app(agent)`` (or ``agent.to_web()``) is an ASGI app; ``treadle ui module:agent``
serves one. The page ships in this package (``static/``: one HTML, one JS and one CSS file,
no build step, nothing fetched from the network) and speaks treadle's own Vercel AI UI
message stream endpoint, so a reload or a dropped connection resumes the answer in flight.
See docs/web.md.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...agent import Agent
    from ...sessions import SessionStore

__all__ = ["new_token", "web_app"]


def new_token() -> str:
    """A random token for a server bound to a non-loopback address."""
    return secrets.token_urlsafe(24)


def web_app(
    agent: Agent[Any],
    *,
    store: SessionStore | None = None,
    token: str | None = None,
    origins: Iterable[str] = (),
    title: str | None = None,
) -> Any:
    """The web app for ``agent`` (an ASGI app; serve it with uvicorn).

    ``agent`` is a template: each conversation (a session) runs on
    :meth:`~treadle.Agent.fork` of it, stored in ``store``, else the agent's own store,
    else memory. ``token``: required of every request (``Authorization: Bearer``, or once
    as ``?token=`` which becomes a cookie) — give one whenever the server listens beyond
    loopback; without one, only loopback host names are answered. Every POST must carry
    the server's own ``Origin`` (or one of ``origins``). Secrets in the server's
    environment (variables named like ``*_KEY``, ``*_TOKEN`` ...) are masked in every
    response.
    """
    from ._app import build_web_app

    return build_web_app(agent, store=store, token=token, origins=origins, title=title)

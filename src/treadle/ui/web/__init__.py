"""A local web app for any agent: chat, a live run inspector, sessions (extra ``web``).

``web_app(agent)`` is an ASGI app; ``treadle ui module:agent``
serves one. The page ships in this package (``static/``: one HTML, two JS (the run inspector,
``inspector.js``, is shared with the eval report) and one CSS file,
no build step, nothing fetched from the network) and speaks treadle's own Vercel AI UI
message stream endpoint, so a reload or a dropped connection resumes the answer in flight.
See docs/web.md.
"""

from __future__ import annotations

import errno
import secrets
import socket
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._guard import DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY_BYTES, is_loopback_name

if TYPE_CHECKING:
    from ...agent import Agent
    from ...sessions import SessionStore

__all__ = ["check_port", "new_token", "serve", "web_app"]


def new_token() -> str:
    """A random token for a server bound to a non-loopback address."""
    return secrets.token_urlsafe(24)


def check_port(host: str, port: int) -> None:
    """Raise :class:`~treadle.ConfigurationError` saying what to do when ``host:port``
    cannot be listened on (another server has it, a privileged port ...), before anything
    is printed or served."""
    from ...errors import ConfigurationError

    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigurationError(
                    f"port {port} on {host} is in use (another server is listening there): "
                    f"choose another with --port {port + 1 if port < 65535 else 8000} "
                    "(or serve(..., port=...)), or stop the other server"
                ) from None
            raise ConfigurationError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another "
                "--host or --port"
            ) from None


def web_app(
    agent: Agent[Any],
    *,
    store: SessionStore | None = None,
    token: str | None = None,
    origins: Iterable[str] = (),
    trusted_hosts: Iterable[str] = (),
    allow_remote: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    title: str | None = None,
) -> Any:
    """The web app for ``agent`` (an ASGI app; serve it with :func:`serve` or uvicorn).

    ``agent`` is a template: each conversation (a session) runs on
    :meth:`~treadle.Agent.fork` of it, stored in ``store``, else the agent's own store,
    else memory. Every request passes the guard all treadle HTTP surfaces share (see
    docs/security.md): ``token`` is required of every request (``Authorization: Bearer``,
    or once as ``?token=``, which becomes a cookie); without one, only loopback peers
    asking for a loopback name are served. A state-changing request must carry the
    server's own ``Origin`` (or one of ``origins``), or be ``application/json`` without
    one. ``trusted_hosts``: ``Host`` names answered besides loopback ones (behind a
    proxy). ``allow_remote``: serve other machines without a token (only behind your own
    authentication). Bodies: at most ``max_body_bytes``, read within ``body_timeout``
    seconds. Secrets in the server's environment (variables named like ``*_KEY``,
    ``*_TOKEN`` ...) are masked in every response.
    """
    from ._app import build_web_app

    return build_web_app(
        agent,
        store=store,
        title=title,
        token=token,
        origins=origins,
        trusted_hosts=trusted_hosts,
        allow_remote=allow_remote,
        max_body_bytes=max_body_bytes,
        body_timeout=body_timeout,
    )


def serve(
    agent: Agent[Any],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    origins: Iterable[str] = (),
    trusted_hosts: Iterable[str] = (),
    store: SessionStore | None = None,
    title: str | None = None,
    request_timeout: float = DEFAULT_BODY_TIMEOUT,
    log_level: str = "warning",
) -> None:
    """Serve ``agent``'s web app until interrupted (what ``treadle ui`` does). On an
    address beyond loopback without ``token``, a new token is made, as Jupyter does; the
    address to open is printed (with ``?token=`` when there is one). Requests must arrive
    whole within ``request_timeout`` seconds (see :func:`treadle.ui.serve`)."""
    from .. import serve as serve_app

    check_port(host, port)  # a clear error, not uvicorn's, before the address is printed
    token = token or (None if is_loopback_name(host) else new_token())
    app = web_app(
        agent,
        store=store,
        token=token,
        origins=origins,
        trusted_hosts=trusted_hosts,
        title=title,
        body_timeout=request_timeout,
    )
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    print(f"    {url}?token={token}" if token else f"    {url}", flush=True)
    serve_app(app, host=host, port=port, request_timeout=request_timeout, log_level=log_level)

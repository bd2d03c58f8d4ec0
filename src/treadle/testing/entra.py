"""A local Microsoft Entra ID: a token endpoint that issues JWT access tokens for client
credentials, and the checks Azure OpenAI makes of a bearer token (signature, audience,
issuer, expiry).

Tokens are signed with HS256 and a secret of the issuer's own (Entra signs with RS256 and
publishes its keys; what a resource checks is the same: the signature, then the claims).
The endpoint runs on a thread of its own, so a credential library's blocking call (as
azure-identity's ``get_bearer_token_provider`` makes from inside an event loop) is answered
while the loop waits. It serves HTTPS when given a certificate: azure-identity accepts no
other authority.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import ssl
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

__all__ = ["EntraID"]

COGNITIVE_SERVICES = "https://cognitiveservices.azure.com"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class EntraID:
    """A tenant with app registrations (``clients``: client id → secret) that issues access
    tokens living ``lifetime`` seconds, and checks them for one ``audience``.

    ``issued`` lists the claims of every token issued, in order."""

    def __init__(
        self,
        *,
        tenant: str = "72f988bf-86f1-41af-91ab-2d7cd011db47",
        clients: Mapping[str, str] | None = None,
        lifetime: int = 3600,
        audience: str = COGNITIVE_SERVICES,
    ) -> None:
        self.tenant = tenant
        self.clients = dict(clients or {"treadle-test-app": "treadle-test-secret"})
        self.lifetime = lifetime
        self.audience = audience
        self.issued: list[dict[str, Any]] = []
        self._key = secrets.token_bytes(32)
        self._lock = threading.Lock()

    @property
    def issuer(self) -> str:
        """The ``iss`` of the tokens (Entra's v1.0 tokens, as Azure OpenAI receives)."""
        return f"https://sts.windows.net/{self.tenant}/"

    def token(
        self,
        scope: str = COGNITIVE_SERVICES + "/.default",
        *,
        client_id: str | None = None,
        lifetime: int | None = None,
    ) -> str:
        """A signed access token for ``scope`` (its ``aud`` is the scope without
        ``/.default``); a negative ``lifetime`` makes one already expired."""
        now = int(time.time())
        life = self.lifetime if lifetime is None else lifetime
        app = client_id or next(iter(self.clients))
        claims = {
            "aud": scope.removesuffix("/.default"),
            "iss": self.issuer,
            "iat": now,
            "nbf": now,
            "exp": now + life,
            "appid": app,
            "oid": str(uuid.uuid5(uuid.NAMESPACE_URL, app)),
            "tid": self.tenant,
            "ver": "1.0",
            "uti": secrets.token_urlsafe(16),
        }
        with self._lock:
            self.issued.append(claims)
        head = _b64(json.dumps({"typ": "JWT", "alg": "HS256"}).encode())
        body = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = hmac.new(self._key, f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{_b64(signature)}"

    def check(self, token: str) -> str | None:
        """Why ``token`` is refused (None: it is a valid token for the audience)."""
        parts = token.split(".")
        if len(parts) != 3:
            return "not a JWT"
        expected = hmac.new(self._key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256)
        try:
            signature = _unb64(parts[2])
            claims = json.loads(_unb64(parts[1]))
        except (ValueError, UnicodeDecodeError):
            return "malformed token"
        if not hmac.compare_digest(signature, expected.digest()):
            return "invalid signature"
        now = time.time()
        if not isinstance(claims, dict):
            return "malformed token"
        if claims.get("iss") != self.issuer:
            return "wrong issuer"
        if claims.get("aud") != self.audience:
            return f"audience is incorrect ({self.audience})"
        if not now < claims.get("exp", 0):
            return "token expired"
        if claims.get("nbf", 0) > now + 300:
            return "token not yet valid"
        return None

    # -- the token endpoint --

    def _grant(self, form: Mapping[str, list[str]]) -> tuple[int, dict[str, Any]]:
        def one(name: str) -> str:
            return (form.get(name) or [""])[0]

        if one("grant_type") != "client_credentials":
            return 400, _oauth_error("unsupported_grant_type", "AADSTS70003")
        client, secret = one("client_id"), one("client_secret")
        if client not in self.clients:
            return 400, _oauth_error("unauthorized_client", "AADSTS700016: app not found")
        if not hmac.compare_digest(secret.encode(), self.clients[client].encode()):
            return 401, _oauth_error("invalid_client", "AADSTS7000215: invalid client secret")
        scopes = [s for s in one("scope").split() if s.endswith("/.default")]
        if len(scopes) != 1:
            return 400, _oauth_error("invalid_scope", "AADSTS1002012: one /.default scope")
        token = self.token(scopes[0], client_id=client)
        reply = {
            "token_type": "Bearer",
            "expires_in": self.lifetime,
            "ext_expires_in": self.lifetime,
            "access_token": token,
        }
        return 200, reply

    def _metadata(self, base: str) -> dict[str, Any]:
        root = f"{base}/{self.tenant}"
        return {
            "token_endpoint": f"{root}/oauth2/v2.0/token",
            "authorization_endpoint": f"{root}/oauth2/v2.0/authorize",
            "device_authorization_endpoint": f"{root}/oauth2/v2.0/devicecode",
            "issuer": f"{root}/v2.0",
            "jwks_uri": f"{root}/discovery/v2.0/keys",
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
            "response_types_supported": ["code", "id_token", "token"],
            "tenant_region_scope": "WW",
        }

    @contextmanager
    def serve(self, *, certfile: str | None = None, keyfile: str | None = None) -> Iterator[str]:
        """Serve the token endpoint on 127.0.0.1 in a thread; yield its authority
        (``https://127.0.0.1:PORT`` with a certificate, else ``http://…``). Its paths are
        Entra's: ``/{tenant}/oauth2/v2.0/token`` and the OpenID configuration."""
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: tests read the outcome, not a log

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                path = urlparse(self.path).path
                if path in (
                    f"/{issuer.tenant}/v2.0/.well-known/openid-configuration",
                    f"/{issuer.tenant}/.well-known/openid-configuration",
                ):
                    self._send(200, issuer._metadata(base))
                else:
                    self._send(404, _oauth_error("not_found", f"no such path {path}"))

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                form = parse_qs(self.rfile.read(length).decode())
                if urlparse(self.path).path != f"/{issuer.tenant}/oauth2/v2.0/token":
                    self._send(404, _oauth_error("not_found", f"no such path {self.path}"))
                    return
                self._send(*issuer._grant(form))

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if certfile:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(certfile, keyfile)
            server.socket = context.wrap_socket(server.socket, server_side=True)
            scheme = "https"
        base = f"{scheme}://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), daemon=True, name="entra-id"
        )
        thread.start()
        try:
            yield base
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)


def _oauth_error(error: str, description: str) -> dict[str, Any]:
    return {"error": error, "error_description": description, "error_codes": [0]}

"""``GoogleOAuthFake``: Google's OAuth token endpoint (and the metadata server that serves
tokens on Google Cloud) on your machine, checking what it is sent the way Google does, and
the check a Google API makes of each request's token.

It signs in a service account of its own (an RSA key made for it) and a gcloud user: give
google-auth the credentials it hands out, with ``token_uri`` pointing at it, and every
token refresh is a real exchange — an RS256-signed JWT assertion verified against the key's
public half, or a refresh token — answered with an access token that expires::

    oauth = GoogleOAuthFake(lifetime_s=3600)
    async with serve(oauth) as tokens, serve(WireFake.vertex(["Hi"], gate=oauth.check)) as api:
        credentials = service_account.Credentials.from_service_account_info(
            oauth.service_account_info(tokens + "/token"),
            scopes=["https://www.googleapis.com/auth/cloud-platform"],
        )
        model = VertexGemini("gemini-2.5-flash", credentials=credentials, base_url=api, ...)

Verifying signatures needs ``cryptography`` (installed with google-auth: the ``vertex`` extra).
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from .._signals import Signal
from ..errors import ConfigurationError
from .exchange import RecordedRequest, Reply
from .wire import Fail

__all__ = ["GoogleOAuthFake", "IssuedToken"]

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
# The audiences Google's endpoint takes (google-auth always names the first, whatever the
# token_uri), and the fake's own address.
GOOGLE_TOKEN_AUDIENCES = (
    "https://oauth2.googleapis.com/token",
    "https://www.googleapis.com/oauth2/v4/token",
)
_MAX_ASSERTION_S = 3600  # Google refuses an assertion valid for longer than an hour
_SKEW_S = 300
_UNAUTHENTICATED = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login "
    "cookie or other valid authentication credential. See "
    "https://developers.google.com/identity/sign-in/web/devconsole-project."
)


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding, rsa
    except ImportError as exc:  # pragma: no cover - installed with google-auth
        raise ConfigurationError(
            f"GoogleOAuthFake needs cryptography ({exc}): pip install 'treadle[vertex]'"
        ) from None
    return hashes, serialization, padding, rsa


def _b64decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


@dataclass(frozen=True)
class IssuedToken:
    """An access token the fake issued: by which grant, and when it stops being accepted
    (seconds since the epoch)."""

    token: str
    grant: str
    expires_at: float


class _Refused(Signal):
    """A grant the token endpoint refuses: answered as a 400, never raised to a caller."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


class GoogleOAuthFake:
    """Google's token endpoint (``POST /token``) and token check, for a service account
    and a gcloud user of its own (see the module docs).

    ``lifetime_s``: how long each access token lives (change it between refreshes to
    issue short-lived ones). ``clock``: seconds since the epoch (``time.time``)."""

    def __init__(
        self,
        *,
        lifetime_s: float = 3600.0,
        project: str = "wirefake-project",
        client_email: str = "treadle-test@wirefake-project.iam.gserviceaccount.com",
        clock: Callable[[], float] = time.time,
    ) -> None:
        rsa = _crypto()[3]
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._public = self._key.public_key()
        self.key_id = secrets.token_hex(20)
        self.lifetime_s = lifetime_s
        self.project = project
        self.client_email = client_email
        self.client_id = "1234567890.apps.googleusercontent.com"
        self.client_secret = secrets.token_urlsafe(18)
        self.refresh_token = "1//wirefake-" + secrets.token_urlsafe(24)
        self.clock = clock
        self.issued: list[IssuedToken] = []
        self.refused: list[str] = []  # why each refused grant was refused
        self._live: dict[str, IssuedToken] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"GoogleOAuthFake(issued={len(self.issued)}, client_email={self.client_email!r})"

    # ---- credentials to hand to google-auth ----

    def service_account_info(self, token_uri: str) -> dict[str, str]:
        """A service-account key file's content (``from_service_account_info``, or written
        to a file for ``GOOGLE_APPLICATION_CREDENTIALS``), its ``token_uri`` this fake."""
        _, serialization, _, _ = _crypto()
        pem = self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return {
            "type": "service_account",
            "project_id": self.project,
            "private_key_id": self.key_id,
            "private_key": pem.decode(),
            "client_email": self.client_email,
            "client_id": "109876543210987654321",
            "token_uri": token_uri,
        }

    def authorized_user_info(
        self, token_uri: str, *, quota_project: str | None = None
    ) -> dict[str, str]:
        """What ``gcloud auth application-default login`` writes (a user's refresh token),
        its ``token_uri`` this fake; ``quota_project`` as ``quota_project_id``. google-auth
        sends a user's refresh to Google's own endpoint whatever a file says: build
        ``google.oauth2.credentials.Credentials(None, refresh_token=…, token_uri=…,
        client_id=…, client_secret=…)`` from it to reach the fake."""
        info = {
            "type": "authorized_user",
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "refresh_token": self.refresh_token,
            "token_uri": token_uri,
        }
        if quota_project is not None:
            info["quota_project_id"] = quota_project
        return info

    # ---- the token endpoint ----

    async def respond(self, request: RecordedRequest) -> Reply:
        """Answer ``POST …/token``, and the metadata server's ``GET /computeMetadata/v1/…``
        (what :func:`~treadle.testing.serve` calls)."""
        if request.method == "GET":
            return self._metadata(request)
        if request.method != "POST" or not request.path.endswith("/token"):
            return _json(404, {"error": "not_found", "error_description": "POST /token"})
        form = {k: v[-1] for k, v in parse_qs(request.body.decode("utf-8", "replace")).items()}
        try:
            grant = form.get("grant_type", "")
            if grant == JWT_BEARER:
                self._verify_assertion(form.get("assertion", ""), request.url.split("?")[0])
            elif grant == "refresh_token":
                self._verify_refresh(form)
            else:
                raise _Refused("unsupported_grant_type", f"Invalid grant_type: {grant}")
        except _Refused as refused:
            with self._lock:
                self.refused.append(refused.description)
            return _json(400, {"error": refused.error, "error_description": refused.description})
        issued = self.issue(grant)
        answer = {
            "access_token": issued.token,
            "expires_in": round(self.lifetime_s),
            "token_type": "Bearer",
        }
        return _json(200, answer)

    def issue(self, grant: str = "direct") -> IssuedToken:
        """A token as the endpoint issues one (for credentials of your own making)."""
        issued = IssuedToken(
            token="ya29.wirefake-" + secrets.token_urlsafe(32),
            grant=grant,
            expires_at=self.clock() + self.lifetime_s,
        )
        with self._lock:
            self.issued.append(issued)
            self._live[issued.token] = issued
        return issued

    def _verify_refresh(self, form: dict[str, str]) -> None:
        if (form.get("client_id"), form.get("client_secret")) != (
            self.client_id,
            self.client_secret,
        ):
            raise _Refused("invalid_client", "The OAuth client was not found.")
        if form.get("refresh_token") != self.refresh_token:
            raise _Refused("invalid_grant", "Token has been expired or revoked.")

    def _verify_assertion(self, assertion: str, token_uri: str) -> None:
        hashes, _, padding, _ = _crypto()
        from cryptography.exceptions import InvalidSignature

        parts = assertion.split(".")
        if len(parts) != 3:
            raise _Refused("invalid_grant", "Invalid JWT: Token must be a short-lived token")
        try:
            header = json.loads(_b64decode(parts[0]))
            claims = json.loads(_b64decode(parts[1]))
            signature = _b64decode(parts[2])
        except ValueError:
            raise _Refused("invalid_grant", "Invalid JWT: not base64url JSON") from None
        if header.get("alg") != "RS256":
            raise _Refused("invalid_grant", f"Invalid JWT: alg {header.get('alg')!r}")
        if header.get("kid") not in (None, self.key_id):
            raise _Refused("invalid_grant", "Invalid JWT Signature.")
        signed = f"{parts[0]}.{parts[1]}".encode("ascii")
        try:
            self._public.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            raise _Refused("invalid_grant", "Invalid JWT Signature.") from None
        if claims.get("iss") != self.client_email:
            raise _Refused("invalid_grant", "Invalid grant: account not found")
        if claims.get("aud") not in (*GOOGLE_TOKEN_AUDIENCES, token_uri):
            raise _Refused("invalid_grant", f"Invalid JWT: bad audience {claims.get('aud')!r}")
        if not claims.get("scope") and not claims.get("target_audience"):
            raise _Refused("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        now = self.clock()
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, (int, float)) or not isinstance(exp, (int, float)):
            raise _Refused("invalid_grant", "Invalid JWT: iat and exp are required")
        if iat > now + _SKEW_S or exp < now - _SKEW_S or exp - iat > _MAX_ASSERTION_S:
            raise _Refused(
                "invalid_grant",
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a "
                "reasonable timeframe. Check your iat and exp values in the JWT claim.",
            )

    # ---- the metadata server (GKE workload identity, Cloud Run, Compute Engine) ----

    def _metadata(self, request: RecordedRequest) -> Reply:
        """What google-auth reads on Google Cloud (``GCE_METADATA_HOST`` and
        ``GCE_METADATA_IP`` point it here): only with ``Metadata-Flavor: Google``."""
        flavor = [("metadata-flavor", "Google")]
        if request.headers.get("metadata-flavor") != "Google":
            return Reply(403, flavor, [b"Missing required header: Metadata-Flavor"])
        path = request.path.removeprefix("/computeMetadata/v1")
        if path in ("", "/"):
            return Reply(200, [*flavor, ("content-type", "application/text")], [b"ok"])
        if path == "/project/project-id":
            return Reply(
                200, [*flavor, ("content-type", "application/text")], [self.project.encode()]
            )
        account = path.removeprefix("/instance/service-accounts/").split("/", 1)
        if len(account) == 2 and account[0] in ("default", self.client_email):
            if account[1] == "token":
                issued = self.issue("metadata")
                body = {
                    "access_token": issued.token,
                    "expires_in": round(self.lifetime_s),
                    "token_type": "Bearer",
                }
                return _json(200, body, flavor)
            if account[1] == "":
                info = {"email": self.client_email, "aliases": ["default"], "scopes": []}
                return _json(200, info, flavor)
        return Reply(404, flavor, [b"Not Found"])

    # ---- the API's side ----

    def live(self, token: str) -> bool:
        """Whether ``token`` was issued here, is not revoked and has not expired."""
        with self._lock:
            issued = self._live.get(token)
        return issued is not None and self.clock() < issued.expires_at

    def revoke(self, token: str) -> None:
        """Stop accepting ``token`` (as if the account's tokens were revoked)."""
        with self._lock:
            self._live.pop(token, None)

    def check(self, request: RecordedRequest) -> Fail | None:
        """A Google API's answer to a request without a live token: HTTP 401
        ``UNAUTHENTICATED`` (None: the request may go on). A wire fake's ``gate``."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.live(token.strip()):
            return None
        body = {"error": {"code": 401, "message": _UNAUTHENTICATED, "status": "UNAUTHENTICATED"}}
        return Fail(
            401,
            body=body,
            headers={"www-authenticate": 'Bearer realm="https://accounts.google.com/"'},
        )


def _json(status: int, payload: Any, extra: list[tuple[str, str]] | None = None) -> Reply:
    body = json.dumps(payload).encode()
    headers = [("content-type", "application/json"), ("cache-control", "no-store")]
    return Reply(status, [*headers, *(extra or [])], [body])

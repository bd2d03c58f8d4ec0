"""``AzureFake``: Azure OpenAI as a wire fake. Azure's addresses (the v1 API and classic
deployments with ``api-version``) and its credentials (an ``api-key``, or an Entra ID bearer
token checked as Azure checks it) in front of a scripted Chat Completions or Responses API::

    entra = EntraID()
    fake = AzureFake.chat(["Hello!"], deployments=["gpt-4o"], entra=entra)
    async with serve(fake) as url:
        provider = AzureOpenAIChat(
            "gpt-4o", azure_endpoint=url, azure_ad_token_provider=entra.token
        )

A request Azure would refuse gets Azure's own answer (401, 404 ``DeploymentNotFound``, a
missing or unsupported ``api-version``) and takes no script item; ``refused`` lists them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote

from ..errors import ConfigurationError
from .entra import EntraID
from .exchange import RecordedRequest, Reply
from .formats.azure import (
    AzureChatFormat,
    AzureResponsesFormat,
    azure_error,
    content_filter_error,
)
from .wire import Fail, FakeTransport, ScriptEntry

if TYPE_CHECKING:
    from ..providers.azure import AzureOpenAIChat, AzureOpenAIResponses

__all__ = ["AzureFake", "EntraID", "content_filtered"]

DEFAULT_KEY = "azure-wirefake-key-0123456789abcdef"
# The versions of the classic API this fake takes (Azure's GA and preview dates), and the
# first that has the Responses API.
_VERSION = re.compile(r"^\d{4}-\d{2}-\d{2}(-preview)?$")
_RESPONSES_SINCE = "2025-03-01-preview"
_V1_VERSIONS = {"v1", "preview", "latest"}

_CHAT_V1 = re.compile(r"^(?P<prefix>.*)/openai/v1/chat/completions$")
_CHAT_CLASSIC = re.compile(r"^(?P<prefix>.*)/openai/deployments/(?P<name>[^/]+)/chat/completions$")
_RESPONSES_V1 = re.compile(r"^(?P<prefix>.*)/openai/v1/responses$")
_RESPONSES_CLASSIC = re.compile(r"^(?P<prefix>.*)/openai/responses$")

_MISSING_KEY = (
    "Access denied due to missing subscription key. Make sure to include subscription key "
    "when making requests to an API."
)
_WRONG_KEY = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to "
    "provide a valid key for an active subscription and use a correct regional API endpoint "
    "for your resource."
)
_BAD_TOKEN = (
    "Unauthorized. Access token is missing, invalid, audience is incorrect "
    "(https://cognitiveservices.azure.com), or have expired."
)
_NO_DEPLOYMENT = (
    "The API deployment for this resource does not exist. If you created the deployment "
    "within the last 5 minutes, please wait a moment and try again."
)


def content_filtered(flagged: Iterable[str] = ("jailbreak",)) -> Fail:
    """A script item: the prompt refused by Azure's content filter (HTTP 400, ``code:
    content_filter``, the ``flagged`` categories in ``innererror.content_filter_result``)."""
    return Fail(400, body=content_filter_error(flagged))


class AzureFake(FakeTransport):
    """Azure OpenAI in front of a scripted API (``api`` ``"chat"`` or ``"responses"``).

    ``deployments`` are the deployments that exist (a request naming another gets 404
    ``DeploymentNotFound``; ``None``: any); a mapping names the model each one runs, which
    the answers carry as Azure's do (else the deployment's name). ``api_key`` is the
    resource's key (``None``: keys refused); ``entra`` the tenant whose tokens are accepted
    (``None``: tokens refused). ``flagged`` are the categories a filtered answer
    (``stop_reason="error"``) names. Other options are :class:`FakeTransport`'s."""

    def __init__(
        self,
        api: str = "chat",
        script: Iterable[ScriptEntry] | str = (),
        *,
        deployments: Sequence[str] | Mapping[str, str] | None = ("gpt-4o-mini",),
        api_key: str | None = DEFAULT_KEY,
        entra: EntraID | None = None,
        flagged: Iterable[str] = ("violence",),
        **options: Any,
    ) -> None:
        if api not in ("chat", "responses"):
            raise ConfigurationError(f"AzureFake api is 'chat' or 'responses', not {api!r}")
        super().__init__("openai" if api == "chat" else "responses", script, **options)
        models = dict(deployments) if isinstance(deployments, Mapping) else {}
        self.format = (
            AzureChatFormat(flagged, models) if api == "chat" else AzureResponsesFormat(models)
        )
        self.api = api
        self.deployments = None if deployments is None else list(deployments)
        self.api_key = api_key
        self.entra = entra
        self.refused: list[tuple[RecordedRequest, int, str]] = []

    @classmethod
    def chat(cls, script: Iterable[ScriptEntry] | str = (), **options: Any) -> AzureFake:
        """Azure OpenAI's Chat Completions."""
        return cls("chat", script, **options)

    @classmethod
    def responses(cls, script: Iterable[ScriptEntry] | str = (), **options: Any) -> AzureFake:
        """Azure OpenAI's Responses API."""
        return cls("responses", script, **options)

    def provider(
        self, model: str | None = None, **kwargs: Any
    ) -> AzureOpenAIChat | AzureOpenAIResponses:
        """The Azure adapter wired to this fake (in process) with its key, on the v1 API."""
        from ..providers.azure import AzureOpenAIChat, AzureOpenAIResponses

        kwargs.setdefault("client", self.client())
        if not any(k in kwargs for k in ("api_key", "auth", "azure_ad_token_provider")):
            kwargs["api_key"] = self.api_key
        if "base_url" not in kwargs:
            kwargs.setdefault("azure_endpoint", "https://wirefake.openai.azure.com")
        name = model or (self.deployments[0] if self.deployments else "gpt-4o-mini")
        adapter = AzureOpenAIChat if self.api == "chat" else AzureOpenAIResponses
        return adapter(name, **kwargs)

    async def respond(self, request: RecordedRequest) -> Reply:
        refusal = self._refusal(request)
        if refusal is None:
            return await super().respond(request)
        status, code, message = refusal
        with self._lock:
            self.requests.append(request)
            self.refused.append((request, status, code))
        body = self.format.error_bytes(azure_error(status, code, message))
        headers = [("content-type", "application/json"), ("x-wirefake-error", code)]
        if status == 401:
            headers.append(("www-authenticate", 'Bearer realm="", error="invalid_token"'))
        return Reply(status, headers, [body])

    # -- what Azure checks before the model sees anything --

    def _refusal(self, request: RecordedRequest) -> tuple[int, str, str] | None:
        path = unquote(request.path.split("?", 1)[0])
        query = parse_qs(request.query)
        versions = query.get("api-version")
        version = versions[0] if versions else None
        chat = self.api == "chat"
        v1 = (_CHAT_V1 if chat else _RESPONSES_V1).match(path)
        classic = (_CHAT_CLASSIC if chat else _RESPONSES_CLASSIC).match(path)
        if (v1 is None and classic is None) or request.method != "POST":
            return 404, "404", "Resource not found"
        if v1 is not None and version is not None and version not in _V1_VERSIONS:
            return 400, "BadRequest", "API version not supported"
        if classic is not None:
            if version is None:
                return 404, "404", "Resource not found"
            if not _VERSION.match(version) or (not chat and version < _RESPONSES_SINCE):
                return 400, "BadRequest", "API version not supported"
        denied = self._credentials(request, v1=v1 is not None)
        if denied is not None:
            return 401, "401", denied
        if classic is not None and chat:
            deployment = classic.group("name")
        else:
            body = request.json if isinstance(request.json, dict) else {}
            deployment = str(body.get("model") or "")
        if self.deployments is not None and deployment not in self.deployments:
            return 404, "DeploymentNotFound", _NO_DEPLOYMENT
        return None

    def _credentials(self, request: RecordedRequest, *, v1: bool) -> str | None:
        """Why the request's credentials are refused (None: accepted)."""
        key = request.headers.get("api-key")
        bearer = request.headers.get("authorization", "")
        token = bearer[len("Bearer ") :] if bearer.startswith("Bearer ") else None
        if key is not None:
            return None if self.api_key and key == self.api_key else _WRONG_KEY
        if token is None:
            return _MISSING_KEY
        if v1 and self.api_key and token == self.api_key:
            return None  # the v1 API also takes the key as a bearer token (the OpenAI client)
        if self.entra is None or self.entra.check(token) is not None:
            return _BAD_TOKEN
        return None

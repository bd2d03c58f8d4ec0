"""Azure OpenAI: Chat Completions and Responses on a resource's v1 endpoint or its classic
deployments, with a key or Microsoft Entra ID (docs/cloud.md#azure-openai).

The wire format is OpenAI's, so these are :class:`OpenAIChat` and :class:`OpenAIResponses`
with Azure's addresses and credentials: the ``api-key`` header, or a bearer token from an
``azure_ad_token_provider`` (the openai SDK's name) asked before each request.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from ..errors import ConfigurationError, UsageError
from ._auth import Credentials, TokenProvider
from .base import ModelRequest, ProviderError
from .openai_chat import OpenAIChat
from .openai_responses import OpenAIResponses

if TYPE_CHECKING:
    from collections.abc import Mapping

AZURE_SCOPE = "https://cognitiveservices.azure.com/.default"
"""The scope of an Entra ID token for Azure OpenAI: what to ask a credential for."""

KEY_VARIABLE = "AZURE_OPENAI_API_KEY"
TOKEN_VARIABLE = "AZURE_OPENAI_AD_TOKEN"
ENDPOINT_VARIABLE = "AZURE_OPENAI_ENDPOINT"
VERSION_VARIABLE = "OPENAI_API_VERSION"


@dataclass(frozen=True)
class AzureTarget:
    """Where requests go: ``root`` is ``…/openai/v1`` (the v1 API) or ``…/openai`` (classic
    deployments, with ``api_version``)."""

    root: str
    api_version: str | None
    classic: bool

    def chat(self, deployment: str) -> str:
        if self.classic:
            where = f"{self.root}/deployments/{quote(deployment, safe='')}/chat/completions"
            return f"{where}?api-version={quote(self.api_version or '', safe='')}"
        return self._versioned(f"{self.root}/chat/completions")

    def responses(self) -> str:
        return self._versioned(f"{self.root}/responses")

    def _versioned(self, url: str) -> str:
        if self.api_version is None:
            return url
        return f"{url}?api-version={quote(self.api_version, safe='')}"


def azure_target(
    azure_endpoint: str | None, base_url: str | None, api_version: str | None
) -> AzureTarget:
    """The API an endpoint and version name, read as the openai SDK reads them: the
    ``AZURE_OPENAI_ENDPOINT`` and ``OPENAI_API_VERSION`` variables when not given; a resource
    endpoint with an API version is a classic deployment, without one the v1 API; an address
    ending in ``/openai/v1`` is the v1 API (an ``api_version=`` given is sent as its query)."""
    if azure_endpoint and base_url:
        raise UsageError(
            "pass azure_endpoint= or base_url= (the same address), not both, as the openai SDK"
        )
    given = azure_endpoint or base_url or os.environ.get(ENDPOINT_VARIABLE, "").strip()
    if not given:
        raise ConfigurationError(
            "no Azure OpenAI endpoint: set the AZURE_OPENAI_ENDPOINT environment variable or "
            "pass azure_endpoint='https://<resource>.openai.azure.com' (or write "
            "'azure:<deployment>@https://<resource>.openai.azure.com')"
        )
    url = given.rstrip("/")
    path = httpx.URL(url).path.rstrip("/") if "://" in url else ""
    if path.endswith("/openai/v1"):
        return AzureTarget(url, api_version, classic=False)
    if path.endswith("/openai"):
        url = url[: -len("/openai")]
    version = api_version or os.environ.get(VERSION_VARIABLE, "").strip() or None
    if version is None:
        return AzureTarget(f"{url}/openai/v1", None, classic=False)
    return AzureTarget(f"{url}/openai", version, classic=True)


def azure_credentials(
    api_key: str | None, auth: Credentials | None, token_provider: TokenProvider | None
) -> tuple[str | None, Credentials | None]:
    """(key, auth) from what was given, else the environment as the openai SDK reads it:
    ``AZURE_OPENAI_AD_TOKEN`` (a fixed token) before ``AZURE_OPENAI_API_KEY``."""
    given = [name for name, v in (("api_key", api_key), ("auth", auth)) if v is not None]
    if token_provider is not None:
        given.append("azure_ad_token_provider")
    if len(given) > 1:
        raise UsageError(
            f"got {' and '.join(given)}: pass one credential (azure_ad_token_provider= for "
            "Microsoft Entra ID, api_key= for a key, auth= for an httpx.Auth of your own)"
        )
    if token_provider is not None:
        if not callable(token_provider):
            raise UsageError(
                "azure_ad_token_provider takes a callable returning a token (azure-identity's "
                "get_bearer_token_provider(credential, AZURE_SCOPE)), not "
                f"{type(token_provider).__name__}"
            )
        return None, token_provider
    if given:
        return api_key, auth
    token = os.environ.get(TOKEN_VARIABLE, "").strip()
    if token:
        return None, lambda: token
    return None, None


def _no_credentials(name: str) -> ProviderError:
    return ProviderError(
        "auth",
        f"no Azure OpenAI credentials: pass azure_ad_token_provider= (Microsoft Entra ID) or "
        f"api_key=, or set the {KEY_VARIABLE} environment variable",
        provider=name,
    )


def _api_key_header(headers: dict[str, str], key: str | None) -> dict[str, str]:
    if key and "api-key" not in map(str.lower, headers):
        headers["api-key"] = key
    return headers


class AzureOpenAIChat(OpenAIChat):
    """A deployment through Azure OpenAI's Chat Completions (docs/cloud.md#azure-openai).

    ``deployment`` is the deployment's name (sent as the model, and in a classic URL).
    Options beyond Azure's own are :class:`OpenAIChat`'s."""

    def __init__(
        self,
        deployment: str,
        *,
        azure_endpoint: str | None = None,
        api_version: str | None = None,
        azure_ad_token_provider: TokenProvider | None = None,
        api_key: str | None = None,
        auth: Credentials | None = None,
        base_url: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        headers: Mapping[str, str] | None = None,
        stream: bool = True,
        **options: Any,
    ) -> None:
        self.target = azure_target(azure_endpoint, base_url, api_version)
        key, credentials = azure_credentials(api_key, auth, azure_ad_token_provider)
        options.setdefault("max_tokens_field", "max_completion_tokens")
        options.setdefault("prompt_cache_fields", True)
        options.setdefault("provider_name", "azure")
        super().__init__(
            deployment,
            api_key=key,
            auth=credentials,
            base_url=self.target.root,
            client=client,
            timeout=timeout,
            headers=headers,
            stream=stream,
            api_key_env=KEY_VARIABLE,
            require_key=True,
            **options,
        )

    def _headers(self) -> dict[str, str]:
        return _api_key_header(self._headers_with({}), self._api_key)

    def _no_key(self, what: str, variable: str) -> ProviderError:
        return _no_credentials(self.name)

    def endpoint(self, request: ModelRequest) -> str:
        return self.target.chat(request.model or self.model)


class AzureOpenAIResponses(OpenAIResponses):
    """A deployment through Azure OpenAI's Responses API (docs/cloud.md#azure-openai)."""

    name = "azure"
    key_variables = (KEY_VARIABLE,)

    def __init__(
        self,
        deployment: str,
        *,
        azure_endpoint: str | None = None,
        api_version: str | None = None,
        azure_ad_token_provider: TokenProvider | None = None,
        api_key: str | None = None,
        auth: Credentials | None = None,
        base_url: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        headers: Mapping[str, str] | None = None,
        stream: bool = True,
        **options: Any,
    ) -> None:
        self.target = azure_target(azure_endpoint, base_url, api_version)
        key, credentials = azure_credentials(api_key, auth, azure_ad_token_provider)
        options.setdefault("prompt_cache_fields", True)
        super().__init__(
            deployment,
            api_key=key,
            auth=credentials,
            base_url=self.target.root,
            client=client,
            timeout=timeout,
            headers=headers,
            stream=stream,
            **options,
        )

    def _key(self) -> str:
        if self._auth is None and not (self._api_key or os.environ.get(KEY_VARIABLE)):
            raise _no_credentials(self.name)
        return self._required_key(KEY_VARIABLE, "Azure OpenAI")

    def _headers(self) -> dict[str, str]:
        key = self._key()
        return _api_key_header(self._headers_with({}), key or None)

    def endpoint(self, request: ModelRequest) -> str:
        return self.target.responses()

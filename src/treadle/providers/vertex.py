"""Google Vertex AI: Gemini and Anthropic's Claude models in a Google Cloud project
(docs/cloud.md#vertex-ai).

The request bodies, the history conversion and the stream decoding are the Gemini and
Anthropic adapters' own; what Vertex adds is the address (project, location, publisher),
the credentials (Google OAuth tokens: :class:`~treadle.providers.GoogleAuth`) and, for
Claude, ``anthropic_version`` in the body in place of the model.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from ..cancellation import CancellationToken
from ..errors import ConfigurationError, UsageError
from ._google import GoogleAuth
from ._http import HTTPOptions
from .anthropic import EXTENDED_CACHE_BETA, Anthropic
from .anthropic_stream import StreamState
from .base import ModelRequest, ProviderError, StreamEvent
from .gemini import _VERSIONED, Gemini

if TYPE_CHECKING:
    from typing_extensions import Unpack

VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
_MULTI_REGIONS = frozenset({"us", "eu"})  # served from aiplatform.{us,eu}.rep.googleapis.com
_HINT = "is the Vertex AI API enabled, and the location right? (GOOGLE_CLOUD_LOCATION)"


def vertex_host(location: str) -> str:
    """The Vertex AI endpoint for ``location``: ``global`` has no region in its host."""
    if location == "global":
        return "https://aiplatform.googleapis.com"
    if location in _MULTI_REGIONS:
        return f"https://aiplatform.{location}.rep.googleapis.com"
    return f"https://{location}-aiplatform.googleapis.com"


def _env(*names: str) -> str | None:
    return next((v.strip() for v in map(os.environ.get, names) if v and v.strip()), None)


@dataclass
class _Place:
    """Where a Vertex model lives: the project (None until the credentials name one), the
    location, and the API root (the host and its version)."""

    project: str | None
    location: str
    base_url: str

    @classmethod
    def resolve(
        cls, project: str | None, location: str | None, base_url: str | None, *, claude: bool
    ) -> _Place:
        # As google-genai reads them; for Claude also as anthropic's AnthropicVertex does.
        project = project or _env(
            "GOOGLE_CLOUD_PROJECT", *(("ANTHROPIC_VERTEX_PROJECT_ID",) if claude else ())
        )
        location = (
            location
            or _env("GOOGLE_CLOUD_LOCATION", *(("CLOUD_ML_REGION",) if claude else ()))
            or "global"
        )
        if "/" in location or not location.strip():
            raise ConfigurationError(
                f"Vertex location {location!r} is not a location: use a region such as "
                "'us-central1', a multi-region ('us', 'eu') or 'global'"
            )
        base_url = (
            base_url
            or _env("GOOGLE_VERTEX_BASE_URL", *(("ANTHROPIC_VERTEX_BASE_URL",) if claude else ()))
            or vertex_host(location)
        )
        return cls(project, location, base_url)

    def prefix(self, root: str) -> str:
        """``{root}/projects/{project}/locations/{location}``."""
        if not self.project:
            raise ProviderError(
                "auth",
                "no Google Cloud project for Vertex AI: set GOOGLE_CLOUD_PROJECT, pass "
                "project=, or use credentials that name one",
            )
        return f"{root}/projects/{self.project}/locations/{self.location}"


def _root(base_url: str) -> str:
    """The API root: ``base_url`` when it ends in a version (``/v1``), else ``/v1`` added."""
    return base_url if _VERSIONED.search(base_url) else f"{base_url}/v1"


def _credentials(cls: str, credentials: Any, options: HTTPOptions) -> Any:
    """``auth=`` for a Vertex adapter: the caller's, else Google credentials (ADC)."""
    if options.get("api_key"):
        raise UsageError(
            f"{cls} takes Google credentials, not api_key=: Application Default Credentials "
            "by default, credentials= (a google-auth Credentials object) or auth= (a token "
            "provider); a Gemini API key goes to Gemini(...)"
        )
    auth = options.get("auth")
    if auth is not None and credentials is not None:
        raise UsageError(f"{cls} got both credentials= and auth=: pass one")
    if auth is None:
        auth = options["auth"] = GoogleAuth(credentials)
    return auth


async def _project(place: _Place, auth: Any) -> None:
    """The project from the credentials, when neither the caller nor the environment gave
    one (read in a worker thread on the first request)."""
    if place.project is None and isinstance(auth, GoogleAuth):
        place.project = await auth.project()


class VertexGemini(Gemini):
    """Gemini on Vertex AI: the Gemini adapter's request and response mapping at
    ``…/projects/{project}/locations/{location}/publishers/google/models/{model}``.

    ``project`` defaults to ``GOOGLE_CLOUD_PROJECT``, then the credentials' project;
    ``location`` to ``GOOGLE_CLOUD_LOCATION``, then ``global``; ``base_url`` to the
    location's endpoint (``GOOGLE_VERTEX_BASE_URL`` overrides it). Credentials: ``auth=``
    (a token provider or an ``httpx.Auth``), else ``credentials=`` (google-auth), else
    Application Default Credentials (docs/cloud.md#vertex-ai)."""

    name = "vertex"
    key_variables = ()
    key_header = None
    connect_hint = _HINT

    def __init__(
        self,
        model: str,
        *,
        project: str | None = None,
        location: str | None = None,
        credentials: Any = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        auth = _credentials(type(self).__name__, credentials, options)
        self.place = _Place.resolve(project, location, options.pop("base_url", None), claude=False)
        if self.place.project is None and not isinstance(auth, GoogleAuth):
            raise ConfigurationError(
                f"{type(self).__name__} needs a project: pass project= or set GOOGLE_CLOUD_PROJECT"
            )
        options["base_url"] = self.place.base_url
        super().__init__(model, **options)

    @property
    def project(self) -> str | None:
        return self.place.project

    @property
    def location(self) -> str:
        return self.place.location

    def url(self, model: str, *, stream: bool) -> str:
        """The endpoint for ``model``: a publisher model's name, or a resource path
        (``endpoints/123`` for a tuned model; ``projects/…`` as it is)."""
        root = _root(self.base_url)
        if model.startswith("projects/"):
            where = f"{root}/{model}"
        elif "/" in model:
            where = f"{self.place.prefix(root)}/{model}"
        else:
            where = f"{self.place.prefix(root)}/publishers/google/models/{model}"
        return f"{where}:{'streamGenerateContent?alt=sse' if stream else 'generateContent'}"

    def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        if self.place.project is None:
            return self._located(request, cancel)
        return super().stream(request, cancel=cancel)

    async def _located(
        self, request: ModelRequest, cancel: CancellationToken | None
    ) -> AsyncIterator[StreamEvent]:
        await _project(self.place, self._auth)
        async for event in super().stream(request, cancel=cancel):
            yield event


class VertexAnthropic(Anthropic):
    """Anthropic's Claude models on Vertex AI: the Anthropic adapter's Messages body, sent
    to ``…/publishers/anthropic/models/{model}:streamRawPredict`` with
    ``anthropic_version: "vertex-2023-10-16"`` in place of the model. Project, location
    and credentials as for :class:`VertexGemini` (also ``ANTHROPIC_VERTEX_PROJECT_ID`` and
    ``CLOUD_ML_REGION``, as anthropic's ``AnthropicVertex`` reads them)."""

    name = "vertex-anthropic"
    connect_hint = _HINT

    def __init__(
        self,
        model: str,
        *,
        project: str | None = None,
        location: str | None = None,
        credentials: Any = None,
        max_tokens: int = 8192,
        thinking_budgets: Mapping[str, int] | None = None,
        cite_documents: bool = False,
        **options: Unpack[HTTPOptions],
    ) -> None:
        auth = _credentials(type(self).__name__, credentials, options)
        self.place = _Place.resolve(project, location, options.pop("base_url", None), claude=True)
        if self.place.project is None and not isinstance(auth, GoogleAuth):
            raise ConfigurationError(
                f"{type(self).__name__} needs a project: pass project= or set GOOGLE_CLOUD_PROJECT"
            )
        options["base_url"] = self.place.base_url
        super().__init__(
            model,
            max_tokens=max_tokens,
            thinking_budgets=thinking_budgets,
            cite_documents=cite_documents,
            **options,
        )

    @property
    def project(self) -> str | None:
        return self.place.project

    @property
    def location(self) -> str:
        return self.place.location

    def url(self, model: str, *, stream: bool) -> str:
        method = "streamRawPredict" if stream else "rawPredict"
        root = self.place.prefix(_root(self.base_url))
        return f"{root}/publishers/anthropic/models/{model}:{method}"

    def _headers(self) -> dict[str, str]:
        return self._headers_with({})  # the version travels in the body; the token in auth

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages body, with ``anthropic_version`` in place of ``model`` (pure)."""
        body = super().build_body(request)
        del body["model"]  # the model is in the URL
        return {"anthropic_version": VERTEX_ANTHROPIC_VERSION, **body}

    def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        if self.place.project is None:
            return self._located(request, cancel)
        return self._send(request, cancel)

    def _send(
        self, request: ModelRequest, cancel: CancellationToken | None
    ) -> AsyncIterator[StreamEvent]:
        model = request.model or self.model
        body = self.build_body(request)
        beta = request.prompt_cache == "long" and "anthropic-beta" not in self._extra_headers
        headers = {"anthropic-beta": EXTENDED_CACHE_BETA} if beta else None
        state = StreamState(self.name, model)
        state.merge = request.coalesce_deltas
        url = self.url(model, stream=self.streaming)
        return self._events(state, url, body, cancel, headers)

    async def _located(
        self, request: ModelRequest, cancel: CancellationToken | None
    ) -> AsyncIterator[StreamEvent]:
        await _project(self.place, self._auth)
        async for event in self._send(request, cancel):
            yield event


VertexModel = Union[VertexGemini, VertexAnthropic]


def vertex_model(model: str, **options: Any) -> VertexModel:
    """The Vertex adapter for ``model``: Anthropic's publisher for ``claude-*`` models,
    Google's for the others (what ``get_provider("vertex:<model>")`` builds)."""
    bare = model.rsplit("/", 1)[-1].lower()
    if bare.startswith("claude"):
        return VertexAnthropic(model, **options)
    return VertexGemini(model, **options)

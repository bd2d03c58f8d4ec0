"""Vertex AI's wire formats: Gemini (Google's publisher) and Claude (Anthropic's publisher)
at ``…/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{model}``.

The bodies are the Gemini and Anthropic formats'; what Vertex adds is the address, and for
Claude the body's ``anthropic_version`` (``vertex-2023-10-16``, or the dated version newer
SDKs send) in place of ``model`` (a body with ``model`` or without a version is refused, as
Vertex refuses it).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from .anthropic import AnthropicFormat
from .base import FormatName
from .gemini import GeminiFormat

VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
_PLACE = r"/v1(?:beta1)?/projects/[^/]+/locations/[^/]+/publishers"
_MODEL = re.compile(r"/models/([^/:]+):")
_VERSION = re.compile(r"^(?:vertex-)?\d{4}-\d{2}-\d{2}$")


def _model(url_path: str, default: str) -> str:
    found = _MODEL.search(url_path)
    return unquote(found.group(1)) if found else default


class VertexGeminiFormat(GeminiFormat):
    """Gemini on Vertex: ``…/publishers/google/models/{model}:streamGenerateContent`` (SSE
    with ``alt=sse``, else a JSON array) and ``:generateContent``; v1 and v1beta1."""

    name: FormatName = "vertex"
    label = "Vertex AI Gemini"
    endpoint = re.compile(_PLACE + r"/google/models/[^/:]+:(?:stream)?[gG]enerateContent$")
    endpoint_hint = (
        "POST /v1/projects/{project}/locations/{location}/publishers/google/models/{model}"
        ":streamGenerateContent"
    )

    def model_of(self, url_path: str, body: Any) -> str:
        return _model(url_path, self.default_model)


class VertexAnthropicFormat(AnthropicFormat):
    """Claude on Vertex: ``…/publishers/anthropic/models/{model}:streamRawPredict`` (the
    Messages stream) and ``:rawPredict`` (one message), the body with ``anthropic_version``
    and no ``model``."""

    name: FormatName = "vertex-anthropic"
    label = "Vertex AI Claude"
    endpoint = re.compile(_PLACE + r"/anthropic/models/[^/:]+:(?:stream)?[rR]awPredict$")
    endpoint_hint = (
        "POST /v1/projects/{project}/locations/{location}/publishers/anthropic/models/{model}"
        ":streamRawPredict"
    )
    default_model = "claude-sonnet-4-5@20250929"

    def is_stream(self, url_path: str, query: str, body: Any) -> bool:
        return url_path.endswith(":streamRawPredict")

    def model_of(self, url_path: str, body: Any) -> str:
        return _model(url_path, self.default_model)

    def refuse(self, url_path: str, body: Any) -> tuple[int, str] | None:
        if not isinstance(body, dict):
            return 400, "the request body must be a JSON object"
        if "model" in body:
            return 400, "model: Extra inputs are not permitted"
        version = body.get("anthropic_version")
        if not isinstance(version, str) or not _VERSION.match(version):
            return 400, f"anthropic_version: Field required (such as {VERTEX_ANTHROPIC_VERSION!r})"
        return None

"""Tool descriptions as a model sees them."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ._base import Model


class ToolSpec(Model):
    """A tool's name, description and JSON-schema parameters, as sent to a provider."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    cache_point: bool = False
    """Cache the prompt up to and including this tool's definition, where the provider takes
    explicit cache points (Anthropic, Bedrock); a tool's ``cache_point`` attribute sets it
    (docs/providers.md#prompt-caching)."""

"""Wire encoders for the fakes: an AssistantMessage as the bytes a provider would send.

One encoder per API. Each turns a message into the events of a streamed response (split in
``events``, which a truncation may cut, and ``tail``, the terminal events that say the
response is complete) or into one non-streamed JSON body, and knows the API's error shapes
(HTTP error bodies and mid-stream error events). The layouts follow real recorded
provider exchanges: field order, ``usage: null`` placeholders, pings, sequence numbers,
Gemini's ``\\r\\n\\r\\n`` separators and so on.
"""

from __future__ import annotations

from collections.abc import Callable

from ...errors import ConfigurationError
from .anthropic import AnthropicFormat
from .base import Context, Encoded, Format, FormatName, StreamErrorKind, number, pieces
from .bedrock import BedrockFormat
from .gemini import GeminiFormat
from .ollama import OllamaFormat
from .openai import OpenAIChatFormat, openai_usage
from .responses import ResponsesFormat
from .vertex import VertexAnthropicFormat, VertexGeminiFormat

FORMATS: dict[str, Callable[[], Format]] = {
    "openai": OpenAIChatFormat,
    "anthropic": AnthropicFormat,
    "responses": ResponsesFormat,
    "gemini": GeminiFormat,
    "ollama": OllamaFormat,
    "bedrock": BedrockFormat,
    "vertex": VertexGeminiFormat,
    "vertex-anthropic": VertexAnthropicFormat,
}
ALIASES = {
    "openai_chat": "openai",
    "openai-chat": "openai",
    "chat": "openai",
    "openai_responses": "responses",
    "openai-responses": "responses",
    "google": "gemini",
    "vertex-gemini": "vertex",
    "vertex_anthropic": "vertex-anthropic",
}


def get_format(name: str) -> Format:
    key = ALIASES.get(name, name)
    factory = FORMATS.get(key)
    if factory is None:
        choices = ", ".join(sorted(FORMATS))
        raise ConfigurationError(f"unknown wire format {name!r}: use one of {choices}")
    return factory()


__all__ = [
    "ALIASES",
    "FORMATS",
    "AnthropicFormat",
    "BedrockFormat",
    "Context",
    "Encoded",
    "Format",
    "FormatName",
    "GeminiFormat",
    "OllamaFormat",
    "OpenAIChatFormat",
    "ResponsesFormat",
    "StreamErrorKind",
    "VertexAnthropicFormat",
    "VertexGeminiFormat",
    "get_format",
    "number",
    "openai_usage",
    "pieces",
]

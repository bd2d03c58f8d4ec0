"""Model providers: the protocol, its types, and the HTTP adapters (imported on first use:
``import treadle`` does not pay for httpx)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._redact import redact_url
from ..types import TextDelta, ThinkingDelta, ToolCallDelta, ToolCallEnd, ToolCallStart
from .base import (
    RETRYABLE_KINDS,
    ErrorKind,
    ModelRequest,
    Provider,
    ProviderError,
    StreamDone,
    StreamEvent,
    StreamFallback,
    StreamStart,
    TextEnd,
    TextStart,
    ThinkingEnd,
    ThinkingLevel,
    ThinkingStart,
)

if TYPE_CHECKING:
    from ._auth import BearerToken, TokenProvider
    from ._aws import AWSSigV4
    from ._google import GoogleAuth
    from .anthropic import Anthropic
    from .azure import AzureOpenAIChat, AzureOpenAIResponses
    from .bedrock import Bedrock
    from .fallback import FALLBACK_ON, FallbackModel
    from .files import FileRule, FileSupport, UnsupportedFile
    from .gemini import Gemini
    from .ollama import Ollama
    from .openai_chat import OpenAIChat
    from .openai_responses import OpenAIResponses
    from .registry import get_provider
    from .vertex import VertexAnthropic, VertexGemini

_LAZY = {
    "BearerToken": "._auth",
    "TokenProvider": "._auth",
    "AWSSigV4": "._aws",
    "Bedrock": ".bedrock",
    "OpenAIChat": ".openai_chat",
    "OpenAIResponses": ".openai_responses",
    "Anthropic": ".anthropic",
    "AzureOpenAIChat": ".azure",
    "AzureOpenAIResponses": ".azure",
    "FallbackModel": ".fallback",
    "FALLBACK_ON": ".fallback",
    "Gemini": ".gemini",
    "Ollama": ".ollama",
    "get_provider": ".registry",
    "GoogleAuth": "._google",
    "VertexGemini": ".vertex",
    "VertexAnthropic": ".vertex",
    "FileRule": ".files",
    "FileSupport": ".files",
    "UnsupportedFile": ".files",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'treadle.providers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "FALLBACK_ON",
    "RETRYABLE_KINDS",
    "AWSSigV4",
    "Anthropic",
    "AzureOpenAIChat",
    "AzureOpenAIResponses",
    "BearerToken",
    "Bedrock",
    "ErrorKind",
    "FallbackModel",
    "FileRule",
    "FileSupport",
    "Gemini",
    "GoogleAuth",
    "ModelRequest",
    "Ollama",
    "OpenAIChat",
    "OpenAIResponses",
    "Provider",
    "ProviderError",
    "StreamDone",
    "StreamEvent",
    "StreamFallback",
    "StreamStart",
    "TextDelta",
    "TextEnd",
    "TextStart",
    "ThinkingDelta",
    "ThinkingEnd",
    "ThinkingLevel",
    "ThinkingStart",
    "TokenProvider",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "UnsupportedFile",
    "VertexAnthropic",
    "VertexGemini",
    "get_provider",
    "redact_url",
]

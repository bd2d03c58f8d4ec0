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
    from .anthropic import Anthropic
    from .azure import AzureOpenAIChat, AzureOpenAIResponses
    from .bedrock import Bedrock
    from .files import FileRule, FileSupport, UnsupportedFile
    from .gemini import Gemini
    from .ollama import Ollama
    from .openai_chat import OpenAIChat
    from .openai_responses import OpenAIResponses
    from .registry import get_provider

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
    "Gemini": ".gemini",
    "Ollama": ".ollama",
    "get_provider": ".registry",
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
    "RETRYABLE_KINDS",
    "AWSSigV4",
    "Anthropic",
    "AzureOpenAIChat",
    "AzureOpenAIResponses",
    "BearerToken",
    "Bedrock",
    "ErrorKind",
    "FileRule",
    "FileSupport",
    "Gemini",
    "ModelRequest",
    "Ollama",
    "OpenAIChat",
    "OpenAIResponses",
    "Provider",
    "ProviderError",
    "StreamDone",
    "StreamEvent",
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
    "get_provider",
    "redact_url",
]

"""Model strings: ``get_provider("anthropic:claude-sonnet-4-5")`` builds the right adapter."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from importlib import import_module
from typing import Any

from ..errors import ConfigurationError
from ._http import env_key, key_variable
from .base import Provider, ProviderError

# OpenAI-compatible servers, reached through OpenAIChat: the base URL (None: the spec must
# give one after "@"), whether a key is required, and options for the adapter.
_COMPATIBLE: dict[str, tuple[str | None, bool, dict[str, Any]]] = {
    "groq": ("https://api.groq.com/openai/v1", True, {}),
    "deepseek": ("https://api.deepseek.com", True, {}),
    "openrouter": ("https://openrouter.ai/api/v1", True, {}),
    "together": ("https://api.together.xyz/v1", True, {}),
    # Mistral rejects stream_options (422) and reports usage on its last chunk anyway.
    "mistral": ("https://api.mistral.ai/v1", True, {"include_usage": False}),
    "vllm": ("http://localhost:8000/v1", False, {}),
    "lmstudio": ("http://localhost:1234/v1", False, {}),
    "openai-compatible": (None, False, {}),
}
# Native adapters: their module and class, and the environment variables their key may
# come from.
_NATIVE: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "openai": ("openai_chat", "OpenAIChat", ("OPENAI_API_KEY",)),
    "openai-responses": ("openai_responses", "OpenAIResponses", ("OPENAI_API_KEY",)),
    "anthropic": ("anthropic", "Anthropic", ("ANTHROPIC_API_KEY",)),
    "gemini": ("gemini", "Gemini", ("GEMINI_API_KEY", "GOOGLE_API_KEY")),
    "google": ("gemini", "Gemini", ("GEMINI_API_KEY", "GOOGLE_API_KEY")),
    "ollama": ("ollama", "Ollama", ()),
    "azure": ("azure", "AzureOpenAIChat", ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN")),
    "azure-responses": (
        "azure",
        "AzureOpenAIResponses",
        ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN"),
    ),
    "bedrock": ("bedrock", "Bedrock", ()),  # credentials: its own chain (docs/cloud.md)
    # Google Cloud credentials (ADC), not a key: claude-* to VertexAnthropic, else VertexGemini
    "vertex": ("vertex", "vertex_model", ()),
}
KNOWN_PROVIDERS: tuple[str, ...] = (*_NATIVE, *_COMPATIBLE)
_AT_URL = re.compile(r"@(?=https?://)")


def get_provider(spec: str, **options: Any) -> Provider:
    """The adapter a ``"provider:model"`` (or ``provider:model@base_url``) string names
    (docs/providers.md#choosing-a-model).

    Args:
        spec: ``"openai:gpt-4o-mini"``, ``"anthropic:claude-sonnet-4-5"``,
            ``"ollama:llama3.2"``, ``"vllm:MODEL@http://host:8000/v1"`` …
        **options: Passed to the adapter's constructor (``api_key``, ``base_url``,
            ``client`` …).

    Returns:
        A :class:`~treadle.providers.Provider` ready to use (nothing is sent until a run).

    Raises:
        ConfigurationError: a malformed spec, an unknown provider, a server-less spec, or
            a missing API key (the message names the environment variable).
    """
    prefix, colon, rest = spec.partition(":")
    prefix = prefix.strip().lower()
    if not colon or not prefix or not rest.strip():
        raise ConfigurationError(
            f"model spec {spec!r} must have the form 'provider:model', for example "
            f"'openai:gpt-4o-mini' or 'ollama:llama3.2' (providers: {', '.join(KNOWN_PROVIDERS)})"
            + _did_you_mean(spec)
        )
    if prefix not in _NATIVE and prefix not in _COMPATIBLE:
        raise ConfigurationError(
            f"unknown provider {prefix!r} in {spec!r}; known providers: "
            f"{', '.join(KNOWN_PROVIDERS)}"
        )
    model, base_url = _split_url(rest.strip())
    if base_url is not None:
        options.setdefault("base_url", base_url)

    variables: tuple[str, ...]
    if prefix in _COMPATIBLE:
        url, needs_key, preset = _COMPATIBLE[prefix]
        if url is None and not options.get("base_url"):
            raise ConfigurationError(
                f"{spec!r} names no server: write '{prefix}:MODEL@http://host:port/v1' "
                "or pass base_url="
            )
        # The key comes only from this server's own variable, never OPENAI_API_KEY: a local
        # or third-party server must not receive the user's OpenAI key.
        variable = key_variable(prefix)
        defaults = {"base_url": url, **preset, "api_key_env": variable, "provider_name": prefix}
        options = {**defaults, **({} if needs_key else {"require_key": False}), **options}
        module, name, variables = "openai_chat", "OpenAIChat", (variable,) if needs_key else ()
    else:
        module, name, variables = _NATIVE[prefix]
        if prefix in ("openai", "openai-responses") and not options.get("base_url"):
            # as the openai SDK does: a proxy or gateway named in the environment
            from_env = os.environ.get("OPENAI_BASE_URL", "").strip()
            if from_env:
                options["base_url"] = from_env
    given = (
        options.get("api_key")
        or options.get("auth") is not None
        or options.get("azure_ad_token_provider") is not None  # Azure's name for a provider
    )
    if variables and not given and env_key(*variables) is None:
        noun = "variable" if len(variables) == 1 else "variables"
        message = f"set the {' or '.join(variables)} environment {noun}, or pass api_key= or auth="
        raise ProviderError("auth", f"no API key for {prefix!r}: {message}", provider=prefix)
    adapter: Callable[..., Provider] = getattr(import_module(f".{module}", __package__), name)
    return adapter(model, **options)


def _did_you_mean(spec: str) -> str:
    """``openai/gpt-4o-mini`` (the form other libraries use) -> a hint at ``openai:...``."""
    vendor, slash, model = spec.partition("/")
    if slash and vendor.strip().lower() in KNOWN_PROVIDERS and model.strip():
        return f"; did you mean '{vendor.strip().lower()}:{model.strip()}'?"
    return ""


# After "@": something that names a server, not a model's version tag such as Vertex's
# "claude-sonnet-4@20250514": a port, a path, or localhost.
_HOST_LIKE = re.compile(r"^(localhost|[\w.-]+:\d+|[\w.-]+\.[\w-]+/|\[[0-9a-fA-F:]+\])", re.ASCII)


def _split_url(rest: str) -> tuple[str, str | None]:
    """``model@http://host/v1`` -> (model, url) (docs/providers.md#choosing-a-model).

    A server written without its scheme (``model@localhost:8000/v1``) is refused: taken as
    part of the model name, the request (and the key) would go to the provider's own host."""
    found = _AT_URL.search(rest)
    if found is None or found.start() == 0:
        model, at, server = rest.rpartition("@")
        if at and model and _HOST_LIKE.match(server):
            raise ConfigurationError(
                f"{server!r} after '@' looks like a server but has no scheme: write "
                f"'{model}@http://{server}' (or https://), or pass base_url="
            )
        return rest, None
    return rest[: found.start()], rest[found.start() + 1 :]

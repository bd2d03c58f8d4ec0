"""Checking what ``Agent(...)`` and ``run(..., model_settings=...)`` are given."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..loop import ModelSettings
from ..providers.base import Provider


def resolve_model(model: Any, *, api_key: str | None, base_url: str | None) -> Provider:
    """The provider ``Agent(model=...)`` names; a clear error for anything else."""
    if isinstance(model, str):
        from ..providers.registry import get_provider

        options = {k: v for k, v in (("api_key", api_key), ("base_url", base_url)) if v}
        return get_provider(model, **options)
    if api_key is not None or base_url is not None:
        raise TypeError(
            "api_key= and base_url= apply to a model string such as 'openai:gpt-4o-mini'; "
            f"this {type(model).__name__} is already built: give them to its constructor."
        )
    if not callable(getattr(model, "stream", None)):
        raise TypeError(
            f"Agent(model=...) takes a model string such as 'openai:gpt-4o-mini' or a "
            f"Provider object, not {type(model).__name__} ({model!r})."
        )
    provider: Provider = model
    return provider


_SETTINGS = frozenset(ModelSettings.__annotations__)


def checked_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(settings) - _SETTINGS)
    if unknown:
        raise TypeError(
            f"unknown model setting(s) {', '.join(unknown)}; "
            f"model_settings takes: {', '.join(sorted(_SETTINGS))}"
        )
    updates = dict(settings)
    if "stop" in updates:
        updates["stop"] = list(updates["stop"])
    return updates

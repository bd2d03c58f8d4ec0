"""Checking what ``Agent(...)`` and ``run(..., model_settings=...)`` are given."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import UsageError
from ..loop.settings import validated_settings
from ..providers.base import Provider


def resolve_model(model: Any, *, api_key: str | None, base_url: str | None) -> Provider:
    """The provider ``Agent(model=...)`` names; a clear error for anything else."""
    if isinstance(model, str):
        if model.strip() == "offline":
            from ..testing import OfflineProvider

            offline: Provider = OfflineProvider()
            return offline
        from ..providers.registry import get_provider

        options = {k: v for k, v in (("api_key", api_key), ("base_url", base_url)) if v}
        return get_provider(model, **options)
    if api_key is not None or base_url is not None:
        raise UsageError(
            "api_key= and base_url= apply to a model string such as 'openai:gpt-4o-mini'; "
            f"this {type(model).__name__} is already built: give them to its constructor."
        )
    if isinstance(model, type):
        raise UsageError(
            f"Agent(model=...) got the class {model.__name__}, not an adapter: build one, "
            f"e.g. {model.__name__}('gpt-4o-mini'), or pass a model string such as "
            "'openai:gpt-4o-mini'."
        )
    if not callable(getattr(model, "stream", None)):
        raise UsageError(
            f"Agent(model=...) takes a model string such as 'openai:gpt-4o-mini' or a "
            f"Provider object, not {type(model).__name__} ({model!r})."
        )
    provider: Provider = model
    return provider


def checked_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Per-run ``model_settings``, validated at the ``run()`` call (see
    :func:`~treadle.loop.settings.validated_settings`)."""
    return validated_settings(settings)

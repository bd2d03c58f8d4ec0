"""The model settings of a run: the names ``Agent(...)`` and ``run(..., model_settings=...)``
take, checked by the rules of the :class:`AgentLoopConfig` fields they set, and the settings
every request of a config carries."""

from __future__ import annotations

from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from ..errors import ConfigurationError, UsageError
from ..providers.base import ThinkingLevel
from .config import AgentLoopConfig


class ModelSettings(TypedDict, total=False):
    """Sampling settings for one run (``Agent.run(..., model_settings={...})``): the same
    names as the :class:`AgentLoopConfig` fields they override."""

    max_tokens: int
    temperature: float
    top_p: float
    seed: int
    stop: str | list[str]
    """Stop sequences; a string is one sequence."""
    presence_penalty: float
    frequency_penalty: float
    extra_body: dict[str, Any]
    thinking_level: ThinkingLevel


def settings_of(config: AgentLoopConfig, *, same_provider: bool = True) -> dict[str, Any]:
    """The model settings every request of ``config`` carries, turns and side calls alike.
    ``extra_body`` is provider-specific: it goes only to the config's own provider."""
    settings: dict[str, Any] = {
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
        "top_p": config.top_p,
        "seed": config.seed,
        "stop": config.stop,
        "presence_penalty": config.presence_penalty,
        "frequency_penalty": config.frequency_penalty,
        "thinking_level": config.thinking_level,
        "prompt_cache": config.prompt_cache,
        "extra_body": dict(config.extra_body) if same_provider else {},
    }
    return settings


_SETTING_NAMES = tuple(ModelSettings.__annotations__)
_settings_model: type[BaseModel] | None = None


def validated_settings(settings: Any, *, where: str = "model_settings") -> dict[str, Any]:
    """``settings`` (model setting names to values, as ``Agent(...)`` or
    ``run(..., model_settings=...)`` take them) checked by the same rules as the
    :class:`AgentLoopConfig` fields they set, at once: an unknown name is a ``TypeError``, a
    bad value (``top_p=2``, ``max_tokens=0``) a ``ValueError`` naming it. Returns the
    values as the config holds them (``stop="END"`` becomes ``["END"]``)."""
    global _settings_model
    unknown = sorted(set(settings) - set(_SETTING_NAMES))
    if unknown:
        raise UsageError(
            f"unknown model setting(s) {', '.join(unknown)}; "
            f"{where} takes: {', '.join(sorted(_SETTING_NAMES))}"
        )
    if _settings_model is None:
        fields = AgentLoopConfig.model_fields
        _settings_model = create_model(  # type: ignore[call-overload]
            "ModelSettings",
            __config__=ConfigDict(extra="forbid"),
            **{name: (fields[name].annotation, fields[name]) for name in _SETTING_NAMES},
        )
    try:
        checked = _settings_model.model_validate(dict(settings))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}={repr(e['input'])[:60]}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise ConfigurationError(f"invalid {where}: {problems}") from None
    return {name: getattr(checked, name) for name in settings}

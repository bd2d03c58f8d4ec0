"""The model settings: the one place their names, types and rules are declared.

``Agent(model_settings=...)``, ``Agent.run(..., model_settings=...)`` and
``AgentLoopConfig(model_settings=...)`` all take a :class:`ModelSettings` dict; every model
request of a config carries them (:func:`settings_of`), as the flat fields of
:class:`~treadle.providers.ModelRequest` the adapters read.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Protocol, Union

from pydantic import AfterValidator, Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic validates it on Python 3.10 and 3.11

from ..errors import ConfigurationError, UsageError
from ..providers.base import ModelRequest, PromptCache, ThinkingLevel


def _one_sequence(value: Union[str, list[str]]) -> list[str]:
    return [value] if isinstance(value, str) else value


class ModelSettings(TypedDict, total=False):
    """Sampling settings sent with every model request of a run. Each is optional; one
    left out (or ``None``) leaves it to the provider.

    Attributes:
        max_tokens: The most tokens an answer may have (at least 1).
        temperature: Sampling temperature (0 or more).
        top_p: Nucleus sampling mass, between 0 and 1.
        seed: For reproducible sampling, where the provider supports it.
        stop: Stop sequences; a string is one sequence (``"END"`` is ``["END"]``).
        presence_penalty: OpenAI-style presence penalty.
        frequency_penalty: OpenAI-style frequency penalty.
        extra_body: Provider-specific fields merged into every request body of the
            config's own provider (never sent to another provider's side calls).
        thinking_level: How much the model reasons before answering, where it can
            (``"off"``, ``"minimal"``, ``"low"``, ``"medium"``, ``"high"``).
        prompt_cache: How long the provider keeps the prompt's cached prefix: ``"short"``
            (the default: Anthropic's 5 minutes, OpenAI's in-memory cache), ``"long"``
            (Anthropic's 1 hour, OpenAI's and Azure's 24 hours) or ``"off"`` (no cache
            points sent).
        prompt_cache_key: Groups requests sharing a prefix where the provider routes by it
            (OpenAI's and Azure's ``prompt_cache_key``): a conversation's or user's id.
    """

    max_tokens: Annotated[int, Field(gt=0)]
    temperature: Annotated[float, Field(ge=0)]
    top_p: Annotated[float, Field(ge=0, le=1)]
    seed: int
    stop: Annotated[Union[str, list[str]], AfterValidator(_one_sequence)]
    presence_penalty: float
    frequency_penalty: float
    extra_body: dict[str, Any]
    thinking_level: ThinkingLevel
    prompt_cache: PromptCache
    prompt_cache_key: Annotated[str, Field(min_length=1, max_length=1024)]


MODEL_SETTING_NAMES: tuple[str, ...] = tuple(ModelSettings.__annotations__)
"""The names of the model settings, in declaration order."""


@cache
def _adapter() -> TypeAdapter[ModelSettings]:
    return TypeAdapter(ModelSettings)


@cache
def _defaults() -> dict[str, Any]:
    """What a request carries for a setting nobody gave: the request's own defaults."""
    fields = ModelRequest.model_fields
    return {
        name: fields[name].get_default(call_default_factory=True) for name in MODEL_SETTING_NAMES
    }


def validated_settings(settings: Any, *, where: str = "model_settings") -> ModelSettings:
    """``settings`` checked by the rules of :class:`ModelSettings`, all at once.

    Args:
        settings: A mapping of model setting names to values; a value of ``None`` is
            dropped (the provider's default).
        where: What the settings were given to, for the error messages.

    Returns:
        The settings as requests carry them (``stop="END"`` becomes ``["END"]``).

    Raises:
        UsageError: ``settings`` is not a mapping, or names a setting that does not exist.
        ConfigurationError: a value breaks its rule (``top_p=2``, ``max_tokens=0``).
    """
    if not hasattr(settings, "items"):
        raise UsageError(
            f"{where} takes a dict of model settings such as {{'temperature': 0.2}}, "
            f"not {type(settings).__name__}"
        )
    given = {name: value for name, value in settings.items() if value is not None}
    unknown = sorted(set(given) - set(MODEL_SETTING_NAMES))
    if unknown:
        raise UsageError(
            f"unknown model setting(s) {', '.join(map(str, unknown))}; "
            f"{where} takes: {', '.join(sorted(MODEL_SETTING_NAMES))}"
        )
    try:
        return _adapter().validate_python(given)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'][:1])}={repr(e['input'])[:60]}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise ConfigurationError(f"invalid {where}: {problems}") from None


def flat_settings_error(names: Any, *, where: str) -> UsageError | None:
    """The error for model settings given as flat keywords (``temperature=0.2``), which
    ``where`` takes as one ``model_settings`` dict; None when ``names`` has none of them."""
    flat = [name for name in names if name in MODEL_SETTING_NAMES]
    if not flat:
        return None
    example = ", ".join(f"{name!r}: ..." for name in flat)
    return UsageError(
        f"{where} takes model settings as one dict: model_settings={{{example}}} "
        f"(for example model_settings={{'temperature': 0.2}}), not {', '.join(flat)}=..."
    )


class _Configured(Protocol):
    """What :func:`settings_of` reads of an ``AgentLoopConfig`` (which imports this)."""

    @property
    def model_settings(self) -> ModelSettings: ...
    @property
    def prompt_cache(self) -> str: ...


def settings_of(config: _Configured, *, same_provider: bool = True) -> dict[str, Any]:
    """Every model setting a request of ``config`` carries (each one, defaults included).
    ``extra_body`` is provider-specific: it goes only to the config's own provider. The
    config's own ``prompt_cache`` (deprecated) applies when the settings have none."""
    settings = {**_defaults(), **config.model_settings}
    settings["extra_body"] = dict(settings["extra_body"]) if same_provider else {}
    if "prompt_cache" not in config.model_settings:
        settings["prompt_cache"] = config.prompt_cache
    return settings

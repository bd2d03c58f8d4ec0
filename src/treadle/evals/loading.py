"""Datasets from files: YAML (the ``evals`` extra: PyYAML), JSON and JSONL, each case and
each evaluator written as plain data."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, MissingExtra, install_hint
from ..types import AssistantMessage
from .checks import Bounds, Check, Contains, Equals, MatchesSchema, OutputEquals, Regex
from .core import Case, Evaluator, unique_names
from .judge import Judge
from .trajectory import Trajectory

Loaded = tuple[str, list[Case], list[Evaluator]]
"""A dataset read from data: its name, its cases and the evaluators every case gets."""

CASE_KEYS = {
    "name",
    "input",
    "expected_output",
    "evaluators",
    "tools",
    "script",
    "metadata",
    "tags",
    "timeout_s",
    "max_user_turns",
}
DATASET_KEYS = {"name", "cases", "evaluators", "judge_model"}


class _Where:
    """Where in the file a value came from, for error messages."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, message: str) -> ValueError:
        return ValueError(f"{self.source}: {message}")


def load_file(path: Path) -> Loaded:
    if not path.is_file():
        raise FileNotFoundError(f"no dataset file at {path}")
    text = path.read_text(encoding="utf-8")
    suffix = path.suffix.lower()
    places: list[str] | None = None  # where each case is, for messages
    if suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise MissingExtra(
                f"reading the YAML dataset {path} needs PyYAML: {install_hint('evals')} "
                "(or write it as JSON or JSONL, read without it)"
            ) from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigurationError(f"{path} is not valid YAML: {exc}") from None
    elif suffix == ".json":
        data = _json(text, str(path))
    elif suffix == ".jsonl":
        lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        data = [_json(line, f"{path}, line {n}") for n, line in lines]
        places = [f"line {n}" for n, _ in lines]
    else:
        raise ConfigurationError(f"{path}: a dataset file is .yaml, .yml, .json or .jsonl")
    if isinstance(data, list):
        data = {"cases": data}
    if not isinstance(data, dict):
        raise ConfigurationError(f"{path}: expected a mapping with 'cases' or a list of cases")
    data.setdefault("name", path.stem)
    return from_data(data, source=str(path), places=places)


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"{where} is not valid JSON: {exc}") from None


def from_data(
    data: Mapping[str, Any], source: str = "dataset", places: list[str] | None = None
) -> Loaded:
    where = _Where(source)
    unknown = set(data) - DATASET_KEYS
    if unknown:
        raise where.fail(f"unknown keys {sorted(unknown)}; a dataset has {sorted(DATASET_KEYS)}")
    judge_model = data.get("judge_model")
    cases_data = data.get("cases")
    if not isinstance(cases_data, list) or not cases_data:
        raise where.fail("'cases' must be a non-empty list of cases")
    shared = [evaluator_from(s, _Where(f"{source}, evaluators"), judge_model) for s in
              data.get("evaluators") or []]  # fmt: skip
    places = places or [f"case {i}" for i in range(1, len(cases_data) + 1)]
    cases = [
        case_from(c, _Where(f"{source}, {place}"), judge_model)
        for c, place in zip(cases_data, places, strict=True)
    ]
    seen: dict[str, str] = {}
    for case, place in zip(cases, places, strict=True):
        if case.name in seen:
            raise where.fail(f"{place} and {seen[case.name]}: two cases named {case.name!r}")
        seen[case.name] = place
        try:
            unique_names([*shared, *case.evaluators], f"case {case.name!r}")
        except ValueError as exc:
            raise where.fail(str(exc)) from None
    return str(data.get("name") or "dataset"), cases, shared


def case_from(data: Any, where: _Where, judge_model: Any) -> Case:
    if not isinstance(data, Mapping):
        raise where.fail(f"a case is a mapping, got {type(data).__name__}")
    if isinstance(data.get("name"), str):
        where = _Where(f"{where.source} ({data['name']!r})")
    unknown = set(data) - CASE_KEYS
    if unknown:
        raise where.fail(f"unknown keys {sorted(unknown)}; a case has {sorted(CASE_KEYS)}")
    fields = dict(data)
    fields["evaluators"] = [
        evaluator_from(s, where, judge_model) for s in data.get("evaluators") or []
    ]
    if data.get("script") is not None:
        script = data["script"]
        if not isinstance(script, list):
            raise where.fail("'script' is a list of answers (strings or assistant messages)")
        fields["script"] = [_script_item(item, where) for item in script]
    try:
        return Case(**fields)
    except (TypeError, ValueError) as exc:
        raise where.fail(str(exc)) from None


def _script_item(item: Any, where: _Where) -> Any:
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        try:
            return AssistantMessage.model_validate(item)
        except ValueError as exc:
            raise where.fail(f"a script item is not an assistant message: {exc}") from None
    raise where.fail(f"a script item is a string or an assistant message, not {item!r}")


def _options(value: Any, main: str, keys: set[str], where: _Where, kind: str) -> dict[str, Any]:
    """``value`` as keyword arguments: a mapping of ``keys``, or the ``main`` argument."""
    if isinstance(value, Mapping) and value and set(value) <= keys | {main, "name"}:
        return dict(value)
    if value is None:
        return {}
    return {main: value}


def _import(ref: str, where: _Where) -> Callable[..., Any]:
    module, _, attr = ref.partition(":")
    if not module or not attr:
        raise where.fail(f"check {ref!r}: name a function as module:function")
    try:
        fn: Any = importlib.import_module(module)
        for part in attr.split("."):
            fn = getattr(fn, part)
    except (ImportError, AttributeError) as exc:
        raise where.fail(f"check {ref!r}: {exc}") from None
    if not callable(fn):
        raise where.fail(f"check {ref!r} is not a function")
    return fn  # type: ignore[no-any-return]


def evaluator_from(spec: Any, where: _Where, judge_model: Any = None) -> Evaluator:
    """An evaluator from its one-key mapping: ``{"contains": "42"}``,
    ``{"trajectory": {"calls": ["add"], "mode": "exact"}}`` ..."""
    if isinstance(spec, Evaluator):
        return spec
    if not isinstance(spec, Mapping) or len(spec) != 1:
        raise where.fail(
            f"an evaluator is a mapping with one key, its kind ({', '.join(sorted(KINDS))}), "
            f"got {spec!r}"
        )
    ((kind, value),) = spec.items()
    make = KINDS.get(kind)
    if make is None:
        raise where.fail(f"unknown evaluator {kind!r}; known: {', '.join(sorted(KINDS))}")
    try:
        return make(value, where, judge_model)
    except (TypeError, ValueError) as exc:
        raise where.fail(f"{kind}: {exc}") from None


def _equals(value: Any, where: _Where, _: Any) -> Evaluator:
    return Equals(**_rename(_options(value, "value", {"ignore_case", "strip"}, where, "equals")))


def _rename(options: dict[str, Any], old: str = "value", new: str = "expected") -> dict[str, Any]:
    if old in options:
        options[new] = options.pop(old)
    return options


def _contains(value: Any, where: _Where, _: Any) -> Evaluator:
    options = _options(value, "texts", {"text", "any", "ignore_case"}, where, "contains")
    if "text" in options:
        options["texts"] = options.pop("text")
    return Contains(**options)


def _regex(value: Any, where: _Where, _: Any) -> Evaluator:
    return Regex(**_options(value, "pattern", {"ignore_case", "full"}, where, "regex"))


def _output_equals(value: Any, where: _Where, _: Any) -> Evaluator:
    if isinstance(value, Mapping):
        if "value" not in value or not set(value) <= {"value", "name"}:
            raise ConfigurationError(
                "write the expected output as {value: ...} (or leave it empty)"
            )
        return OutputEquals(value["value"], name=value.get("name"))
    return OutputEquals() if value is None else OutputEquals(value)


def _schema(value: Any, where: _Where, _: Any) -> Evaluator:
    if isinstance(value, Mapping) and "schema" in value and set(value) <= {"schema", "name"}:
        return MatchesSchema(dict(value["schema"]), name=value.get("name"))
    if not isinstance(value, Mapping):
        raise ConfigurationError("the schema is a JSON Schema mapping")
    return MatchesSchema(dict(value))


def _trajectory(value: Any, where: _Where, _: Any) -> Evaluator:
    if isinstance(value, Mapping):
        return Trajectory(**dict(value))
    return Trajectory(value)


def _bounds(value: Any, where: _Where, _: Any) -> Evaluator:
    if not isinstance(value, Mapping):
        raise ConfigurationError("bounds is a mapping: {max_turns: 3, max_cost_usd: 0.01, ...}")
    return Bounds(**dict(value))


def _judge(value: Any, where: _Where, judge_model: Any) -> Evaluator:
    options = _options(value, "rubric", {"model", "threshold", "reference"}, where, "judge")
    options.setdefault("model", judge_model)
    if not options["model"]:
        raise ConfigurationError(
            "the judge needs a model: judge: {rubric: ..., model: ...} or judge_model"
        )
    return Judge(**options)


def _check(value: Any, where: _Where, _: Any) -> Evaluator:
    options = _options(value, "function", {"threshold"}, where, "check")
    fn = _import(str(options.pop("function", "")), where)
    return Check(fn, **options)


KINDS: dict[str, Callable[[Any, _Where, Any], Evaluator]] = {
    "equals": _equals,
    "contains": _contains,
    "regex": _regex,
    "output_equals": _output_equals,
    "schema": _schema,
    "trajectory": _trajectory,
    "bounds": _bounds,
    "judge": _judge,
    "check": _check,
}

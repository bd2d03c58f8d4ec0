"""The tool trajectory: which tools the agent called, in which order, with which arguments."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ConfigurationError, UsageError
from ..types import ToolCall
from .core import EvalContext, Evaluator, Score
from .jsonish import as_json

Mode = Literal["subset", "ordered", "exact"]
MODES = ("subset", "ordered", "exact")


@dataclass(frozen=True)
class Call:
    """An expected tool call: the tool's ``name`` and, optionally, ``arguments``. By default
    the arguments given must be among the call's, with these values (others may be there
    too); ``exact_arguments=True`` wants exactly these."""

    name: str
    arguments: Mapping[str, Any] | None = None
    exact_arguments: bool = False

    def matches(self, call: ToolCall) -> bool:
        if call.name != self.name:
            return False
        if self.arguments is None:
            return True
        want, got = as_json(dict(self.arguments)), as_json(call.arguments)
        if self.exact_arguments:
            return bool(want == got)
        return all(k in got and got[k] == v for k, v in want.items())

    def __str__(self) -> str:
        if self.arguments is None:
            return self.name
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        return f"{self.name}({args}{'' if self.exact_arguments else ', …'})"


def as_call(value: str | Call | Mapping[str, Any]) -> Call:
    """A tool name, a :class:`Call`, or a mapping ``{"name": ..., "arguments": ...}``."""
    if isinstance(value, Call):
        return value
    if isinstance(value, str):
        return Call(value)
    if isinstance(value, Mapping) and isinstance(value.get("name"), str):
        unknown = set(value) - {"name", "arguments", "exact_arguments"}
        if unknown:
            raise ConfigurationError(f"an expected call has unknown keys {sorted(unknown)}")
        return Call(value["name"], value.get("arguments"), bool(value.get("exact_arguments")))
    raise UsageError(
        f"an expected tool call is a tool name, a Call or {{'name': ..., 'arguments': ...}}, "
        f"not {value!r}"
    )


def _show(calls: Sequence[ToolCall]) -> str:
    return "[" + ", ".join(c.name for c in calls) + "]" if calls else "no tool calls"


@dataclass
class Trajectory(Evaluator):
    """The agent's own tool calls against ``calls``:

    - ``"subset"`` (default): each expected call was made (a call counts once; others may
      be made too); the score is the share found;
    - ``"ordered"``: the expected calls were made in this order (others may come between);
      the score is the share of the longest run of them found in order;
    - ``"exact"``: exactly these calls, in this order, and no others (score 1 or 0).

    An empty ``calls`` with ``"exact"`` means: no tool at all."""

    calls: Sequence[str | Call | Mapping[str, Any]] = field(default_factory=list)
    mode: Mode = "subset"
    name: str = "trajectory"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigurationError(f"Trajectory mode {self.mode!r} is not one of {MODES}")
        if isinstance(self.calls, (str, Call)):
            self.calls = [self.calls]
        self.expected = [as_call(c) for c in self.calls]
        if not self.expected and self.mode != "exact":
            raise ConfigurationError(
                "Trajectory needs the calls to look for (mode='exact' with none: no tool "
                "may be called)"
            )

    async def evaluate(self, ctx: EvalContext) -> Score:
        made = ctx.tool_calls
        calls = [str(c) for c in self.expected]
        if self.mode == "exact":
            return self._exact(made)
        if self.mode == "ordered":
            found = 0
            for call in made:
                if found < len(self.expected) and self.expected[found].matches(call):
                    found += 1
            value = found / len(self.expected)
            if found == len(self.expected):
                return self.score(1.0, f"{calls} in order in {_show(made)}")
            absent = self.expected[found]
            return self.score(
                value,
                f"{found} of {len(calls)} in order; {absent} not found after them in {_show(made)}",
            )
        unused = list(made)
        missing = []
        for expected in self.expected:
            hit = next((c for c in unused if expected.matches(c)), None)
            if hit is None:
                missing.append(str(expected))
            else:
                unused.remove(hit)
        value = (len(self.expected) - len(missing)) / len(self.expected)
        if not missing:
            return self.score(1.0, f"all of {calls} made ({_show(made)})")
        return self.score(value, f"not made: {missing} ({_show(made)})")

    def _exact(self, made: list[ToolCall]) -> Score:
        for i, (expected, call) in enumerate(zip(self.expected, made, strict=False)):
            if not expected.matches(call):
                args = as_json(call.arguments)
                return self.score(
                    0.0, f"call {i + 1}: expected {expected}, got {call.name}({args})"
                )
        if len(made) != len(self.expected):
            return self.score(
                0.0,
                f"{len(self.expected)} calls expected, {len(made)} made ({_show(made)})",
            )
        return self.score(1.0, f"exactly {_show(made)}")

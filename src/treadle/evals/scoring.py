"""What every evaluator gets and gives: the :class:`EvalContext` of one sample (a case run
once on one model) and the :class:`Score` it returns, and the :class:`Evaluator` base."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from ..loop import Hooks
from ..providers import Provider
from ..types import AgentEvent, AgentMessage, AssistantMessage, ToolCall, Usage, UserMessage

if TYPE_CHECKING:
    from ..agent import RunResult
    from .dataset import Case


class Score(BaseModel):
    """One evaluator's verdict on one sample: ``value`` from 0 to 1, whether it
    ``passed``, and a ``reason`` a person can read. A judge keeps its reasoning in
    ``reason`` and its own model's tokens and cost in ``usage``; ``error`` is set when the
    evaluator itself failed (it raised, or a judge's answer was no verdict)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    value: float = Field(ge=0.0, le=1.0)
    passed: bool
    reason: str = ""
    details: dict[str, Any] | None = None
    usage: Usage | None = None
    error: bool = False


@dataclass
class EvalContext:
    """What an evaluator sees of one sample: the case, every run of it (one per user turn)
    and what they produced.

    ``output`` is the last run's structured output when the agent has an ``output_type``,
    else its text. ``tool_calls`` are the agent's own calls (not its sub-agents'), in the
    order the model asked for them. ``turns`` counts model turns of the agent's own loop;
    ``duration_s`` is the time from the first prompt to the last run's end, on the event
    loop's clock. ``resolve_model`` turns a model string into a provider the way the run
    does (its cassette included): a judge's model."""

    case: Case
    model: str
    repeat: int
    inputs: list[str | UserMessage]
    results: list[RunResult[Any]]
    events: list[AgentEvent]
    duration_s: float
    resolve_model: Callable[[str | Provider], Provider] = field(repr=False)
    hooks: list[Hooks] = field(default_factory=list, repr=False)
    """Hooks a judge's own run gets too (the run's tracing)."""

    @property
    def result(self) -> RunResult[Any] | None:
        """The last run (None when the sample ended before its first run did)."""
        return self.results[-1] if self.results else None

    @property
    def text(self) -> str:
        """The last assistant text of the conversation."""
        for message in reversed(self.messages):
            if isinstance(message, AssistantMessage) and message.text:
                return message.text
        return ""

    @property
    def output(self) -> Any:
        result = self.result
        if result is not None and result.output is not None:
            return result.output
        return self.text

    @property
    def expected_output(self) -> Any:
        return self.case.expected_output

    @property
    def messages(self) -> list[AgentMessage]:
        """The whole conversation: every run's new messages, in order."""
        return [m for result in self.results for m in result.messages]

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [
            call
            for message in self.messages
            if isinstance(message, AssistantMessage)
            for call in message.tool_calls
        ]

    @property
    def usage(self) -> Usage:
        """Tokens and cost of every run (sub-agents', planning's and compaction's included)."""
        total = Usage()
        for result in self.results:
            total = total + result.usage
        return total

    @property
    def cost_usd(self) -> float | None:
        return self.usage.cost_usd

    @property
    def turns(self) -> int:
        return sum(1 for e in self.events if e.type == "turn_start" and e.depth == 0)

    @property
    def reason(self) -> str:
        """Why the last run ended (``completed``, ``error``, ``limit`` ...)."""
        result = self.result
        return result.reason if result is not None else "error"


class Evaluator:
    """Scores one sample. Subclass it and write :meth:`evaluate`; ``name`` (the class's
    name by default) labels its scores in reports, so two evaluators of a case need two
    names."""

    name: str = ""

    def label(self) -> str:
        return self.name or type(self).__name__

    async def evaluate(self, ctx: EvalContext) -> Score:
        raise NotImplementedError(f"{type(self).__name__} must define evaluate(ctx)")

    def score(
        self, value: float, reason: str = "", *, passed: bool | None = None, **details: Any
    ) -> Score:
        """A :class:`Score` named after this evaluator; ``passed`` defaults to
        ``value == 1``."""
        value = min(1.0, max(0.0, float(value)))
        return Score(
            name=self.label(),
            value=value,
            passed=value >= 1.0 if passed is None else passed,
            reason=reason,
            details=details or None,
        )


CheckResult = bool | float | Score | tuple[float | bool, str] | None


class Check(Evaluator):
    """Any Python function as an evaluator: ``fn(ctx)`` (sync or async) returns a bool
    (passed or not), a number from 0 to 1 (passed at ``threshold``), a ``(value, reason)``
    pair, or a whole :class:`Score`."""

    def __init__(
        self,
        fn: Callable[[EvalContext], CheckResult | Awaitable[CheckResult]],
        *,
        name: str | None = None,
        threshold: float = 1.0,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"Check needs a function of the sample's EvalContext, got {fn!r}")
        self.fn = fn
        self.name = name or str(getattr(fn, "__name__", "check"))
        self.threshold = threshold

    def __repr__(self) -> str:
        return f"Check({self.name})"

    async def evaluate(self, ctx: EvalContext) -> Score:
        got: Any = self.fn(ctx)
        if inspect.isawaitable(got):
            got = await got
        if isinstance(got, Score):
            return got
        reason = ""
        if isinstance(got, tuple) and len(got) == 2:
            got, reason = got
        if isinstance(got, bool):
            return self.score(1.0 if got else 0.0, str(reason))
        if isinstance(got, (int, float)):
            value = float(got)
            return self.score(value, str(reason), passed=value >= self.threshold)
        raise TypeError(
            f"check {self.name!r} returned {got!r}: return a bool, a number from 0 to 1, "
            "a (value, reason) pair or a Score"
        )


def evaluator(
    fn: Callable[[EvalContext], Any] | None = None,
    *,
    name: str | None = None,
    threshold: float = 1.0,
) -> Any:
    """``@evaluator`` makes a function a :class:`Check` (``@evaluator(threshold=0.5)``
    too)."""
    if fn is None:
        return lambda f: Check(f, name=name, threshold=threshold)
    return Check(fn, name=name, threshold=threshold)


def failed_score(name: str, exc: BaseException) -> Score:
    """The score of an evaluator that raised: failed, with the exception as its reason."""
    return Score(
        name=name, value=0.0, passed=False, reason=f"{type(exc).__name__}: {exc}", error=True
    )


def unique_names(evaluators: Sequence[Evaluator], where: str) -> None:
    seen: set[str] = set()
    for ev in evaluators:
        if not isinstance(ev, Evaluator):
            raise TypeError(
                f"{where}: {ev!r} is not an Evaluator (use Equals, Contains, Trajectory, "
                "Judge ..., or wrap a function in Check)"
            )
        label = ev.label()
        if label in seen:
            raise ValueError(f"{where}: two evaluators are named {label!r}; give one name=...")
        seen.add(label)

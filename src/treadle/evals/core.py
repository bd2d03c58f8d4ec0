"""What a dataset is made of and what its evaluators see and give: a :class:`Case`, the
:class:`EvalContext` of one sample (a case run once on one model), the :class:`Evaluator`
base and the :class:`Score` it returns."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigurationError, UsageError
from ..loop import Hooks
from ..providers import Provider
from ..testing import ScriptItem
from ..types import AgentEvent, AgentMessage, AssistantMessage, ToolCall, Usage, UserMessage
from .recorded import tool_answers

if TYPE_CHECKING:
    from ..agent import RunResult


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


Prompt = Union[str, UserMessage]
User = Callable[
    [Union["RunResult[Any]", None], int], Union[Prompt, Awaitable[Union[Prompt, None]], None]
]
"""A scripted user: given the run that just ended (None before the first) and how many user
turns were sent, the next message, or None to end the conversation (sync or async)."""


@dataclass
class Case:
    """One thing to measure: what the user says, what should come out, and how to judge it.

    Attributes:
        name: Unique in its dataset; reports and baselines match cases by it.
        input: The user's prompt, or a list of them: one turn each, in order, each sent
            when the agent's answer to the one before has ended (a multi-turn case).
        expected_output: The answer or structured output expected (what ``Equals``,
            ``Contains``, ``OutputEquals`` and a judge's reference compare with).
        evaluators: This case's evaluators, run after the dataset's.
        tools: Recorded tool answers, by tool name: the agent's calls of these tools are
            answered from here and the real tools never run (see ``ToolAnswer``).
        script: A scripted model for this case (``ScriptedProvider`` items, played anew in
            each sample), used instead of the run's model: a case that needs no model.
        user: After the turns in ``input``, a scripted user that writes the next message
            from the last run (``None`` ends the conversation), at most ``max_user_turns``
            turns in all.
        metadata: Anything, shown in reports.
        tags: Labels to select cases by (``Dataset.filter(tags=...)``, ``--tag``).
        timeout_s: This case's time limit (default: the run's ``timeout_s``).
    """

    name: str
    input: Prompt | Sequence[Prompt] = ""
    expected_output: Any = None
    evaluators: Sequence[Evaluator] = ()
    tools: Mapping[str, Any] = field(default_factory=dict)
    script: Sequence[ScriptItem] | None = None
    user: User | None = None
    max_user_turns: int = 10
    metadata: dict[str, Any] = field(default_factory=dict)
    tags: Sequence[str] = ()
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigurationError(f"a case needs a name (a non-empty string), got {self.name!r}")
        where = f"case {self.name!r}"
        if not self.turns and self.user is None:
            raise ConfigurationError(f"{where} has no input: give input='...' (or a list of turns)")
        for turn in self.turns:
            if not isinstance(turn, (str, UserMessage)):
                raise UsageError(
                    f"{where}: an input turn is a string or a UserMessage (UserMessage.of(text, "
                    f"image) for images), not {type(turn).__name__}"
                )
        self.evaluators = list(self.evaluators)
        unique_names(self.evaluators, where)
        if not isinstance(self.tools, Mapping):
            raise UsageError(f"{where}: tools maps tool names to recorded answers")
        for name, answers in self.tools.items():
            try:
                tool_answers(answers)
            except ValueError as exc:
                raise ConfigurationError(f"{where}, tool {name!r}: {exc}") from None
        if isinstance(self.script, str):
            self.script = [self.script]
        if self.script is not None and not self.script:
            raise ConfigurationError(f"{where}: an empty script answers nothing; leave script out")
        if isinstance(self.tags, str):
            self.tags = [self.tags]
        self.tags = [str(t) for t in self.tags]
        if self.max_user_turns < 1:
            raise ConfigurationError(f"{where}: max_user_turns must be at least 1")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ConfigurationError(f"{where}: timeout_s must be positive")

    @property
    def turns(self) -> list[Prompt]:
        """The user's scripted turns (``input`` as a list)."""
        if isinstance(self.input, str):
            return [self.input] if self.input else []
        if isinstance(self.input, Sequence):
            return list(self.input)
        return [self.input]


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
    inputs: list[Prompt]
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


def failed_score(name: str, exc: BaseException) -> Score:
    """The score of an evaluator that raised: failed, with the exception as its reason."""
    return Score(
        name=name, value=0.0, passed=False, reason=f"{type(exc).__name__}: {exc}", error=True
    )


def unique_names(evaluators: Sequence[Evaluator], where: str) -> None:
    seen: set[str] = set()
    for ev in evaluators:
        if not isinstance(ev, Evaluator):
            raise UsageError(
                f"{where}: {ev!r} is not an Evaluator (use Equals, Contains, Trajectory, "
                "Judge ..., or wrap a function in Check)"
            )
        label = ev.label()
        if label in seen:
            raise ConfigurationError(
                f"{where}: two evaluators are named {label!r}; give one name=..."
            )
        seen.add(label)


@runtime_checkable
class Cases(Protocol):
    """What a run needs of a dataset (:class:`~treadle.evals.Dataset` is one)."""

    name: str
    cases: list[Case]

    def evaluators_for(self, case: Case) -> list[Evaluator]: ...

"""Datasets: the cases an agent is measured on, written in Python or loaded from YAML,
JSON or JSONL (``loading.py``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from ..testing import ScriptItem
from ..types import UserMessage
from .recorded import tool_answers
from .scoring import Evaluator, unique_names

if TYPE_CHECKING:
    from ..agent import RunResult
    from .report import EvalReport
    from .runner import Target

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
            raise ValueError(f"a case needs a name (a non-empty string), got {self.name!r}")
        where = f"case {self.name!r}"
        if not self.turns and self.user is None:
            raise ValueError(f"{where} has no input: give input='...' (or a list of turns)")
        for turn in self.turns:
            if not isinstance(turn, (str, UserMessage)):
                raise TypeError(
                    f"{where}: an input turn is a string or a UserMessage (UserMessage.of(text, "
                    f"image) for images), not {type(turn).__name__}"
                )
        self.evaluators = list(self.evaluators)
        unique_names(self.evaluators, where)
        if not isinstance(self.tools, Mapping):
            raise TypeError(f"{where}: tools maps tool names to recorded answers")
        for name, answers in self.tools.items():
            try:
                tool_answers(answers)
            except ValueError as exc:
                raise ValueError(f"{where}, tool {name!r}: {exc}") from None
        if isinstance(self.script, str):
            self.script = [self.script]
        if self.script is not None and not self.script:
            raise ValueError(f"{where}: an empty script answers nothing; leave script out")
        if isinstance(self.tags, str):
            self.tags = [self.tags]
        self.tags = [str(t) for t in self.tags]
        if self.max_user_turns < 1:
            raise ValueError(f"{where}: max_user_turns must be at least 1")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ValueError(f"{where}: timeout_s must be positive")

    @property
    def turns(self) -> list[Prompt]:
        """The user's scripted turns (``input`` as a list)."""
        if isinstance(self.input, str):
            return [self.input] if self.input else []
        if isinstance(self.input, Sequence):
            return list(self.input)
        return [self.input]


class Dataset:
    """Cases and the evaluators every case gets (run before each case's own)."""

    def __init__(
        self,
        cases: Sequence[Case],
        *,
        name: str = "dataset",
        evaluators: Sequence[Evaluator] = (),
    ) -> None:
        self.name = name
        self.cases = list(cases)
        self.evaluators = list(evaluators)
        unique_names(self.evaluators, f"dataset {name!r}")
        seen: set[str] = set()
        for case in self.cases:
            if not isinstance(case, Case):
                raise TypeError(f"dataset {name!r}: {case!r} is not a Case")
            if case.name in seen:
                raise ValueError(f"dataset {name!r} has two cases named {case.name!r}")
            seen.add(case.name)
            unique_names([*self.evaluators, *case.evaluators], f"case {case.name!r}")

    def __repr__(self) -> str:
        return f"Dataset({self.name!r}, {len(self.cases)} cases)"

    def __len__(self) -> int:
        return len(self.cases)

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    def evaluators_for(self, case: Case) -> list[Evaluator]:
        return [*self.evaluators, *case.evaluators]

    def filter(
        self, *, tags: Sequence[str] | None = None, names: Sequence[str] | None = None
    ) -> Dataset:
        """The cases having any of ``tags`` and (if given) one of ``names``."""
        known = {c.name for c in self.cases}
        missing = sorted(set(names or ()) - known)
        if missing:
            raise ValueError(f"dataset {self.name!r} has no case named {missing}")
        cases = [
            c
            for c in self.cases
            if (not tags or set(tags) & set(c.tags)) and (not names or c.name in names)
        ]
        return Dataset(cases, name=self.name, evaluators=self.evaluators)

    @classmethod
    def from_file(cls, path: str | Path, *, evaluators: Sequence[Evaluator] = ()) -> Dataset:
        """Load ``.yaml`` / ``.yml`` (the ``evals`` extra), ``.json`` or ``.jsonl`` (one case
        per line). See docs/evals.md for the format."""
        from .loading import load_file

        return load_file(Path(path), evaluators)

    @classmethod
    def from_dicts(
        cls,
        cases: Sequence[Mapping[str, Any]],
        *,
        name: str = "dataset",
        evaluators: Sequence[Evaluator | Mapping[str, Any]] = (),
    ) -> Dataset:
        """Cases written as plain data (the file formats' shape)."""
        from .loading import from_data

        return from_data({"name": name, "cases": list(cases), "evaluators": list(evaluators)})

    async def evaluate(self, target: Target, **options: Any) -> EvalReport:
        """Run every case on ``target``: see :func:`treadle.evals.evaluate`."""
        from .runner import evaluate

        return await evaluate(self, target, **options)

    def evaluate_sync(self, target: Target, **options: Any) -> EvalReport:
        """:meth:`evaluate` from code that is not async (a script, a notebook)."""
        from .runner import evaluate_sync

        return evaluate_sync(self, target, **options)

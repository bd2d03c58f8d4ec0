"""Datasets: the cases an agent is measured on, written in Python or loaded from YAML,
JSON or JSONL (``loading.py``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, UsageError
from .core import Case, Evaluator, unique_names
from .loading import from_data, load_file

if TYPE_CHECKING:
    from .report import EvalReport
    from .runner import Target


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
                raise UsageError(f"dataset {name!r}: {case!r} is not a Case")
            if case.name in seen:
                raise ConfigurationError(f"dataset {name!r} has two cases named {case.name!r}")
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
            raise ConfigurationError(f"dataset {self.name!r} has no case named {missing}")
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
        name, cases, found = load_file(Path(path))
        return cls(cases, name=name, evaluators=[*evaluators, *found])

    @classmethod
    def from_dicts(
        cls,
        cases: Sequence[Mapping[str, Any]],
        *,
        name: str = "dataset",
        evaluators: Sequence[Evaluator | Mapping[str, Any]] = (),
    ) -> Dataset:
        """Cases written as plain data (the file formats' shape)."""
        data = {"name": name, "cases": list(cases), "evaluators": list(evaluators)}
        name, found, shared = from_data(data)
        return cls(found, name=name, evaluators=shared)

    async def evaluate(self, target: Target, **options: Any) -> EvalReport:
        """Run every case on ``target``: see :func:`treadle.evals.evaluate`."""
        from .runner import evaluate

        return await evaluate(self, target, **options)

    def evaluate_sync(self, target: Target, **options: Any) -> EvalReport:
        """:meth:`evaluate` from code that is not async (a script, a notebook)."""
        from .runner import evaluate_sync

        return evaluate_sync(self, target, **options)

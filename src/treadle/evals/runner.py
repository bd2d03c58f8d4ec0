"""Running a dataset: every case on every model, ``repeat`` times, at most ``concurrency``
samples at once; stopping keeps what finished."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Union

import anyio

from ..errors import ConfigurationError, UsageError
from ..providers import Provider
from ..testing import Cassette, OfflineProvider
from .core import Case, Cases
from .jsonish import as_json
from .progress import Progress, make_progress
from .report import EvalReport
from .results import CaseResult, ModelSummary, SampleResult, Unfinished
from .sample import SampleSpec, run_sample
from .tracing import EvalTracing, tracing_available

if TYPE_CHECKING:
    from ..agent import Agent

Target = Union["Agent[Any]", Callable[[Provider], "Agent[Any]"]]
"""What is evaluated: an :class:`~treadle.Agent` (each sample runs on a fork of it, with a
history of its own, switched to the sample's model) or a function of the model returning
a fresh Agent."""

ModelFactory = Callable[[Case, int], Provider]
ModelSpec = Union[str, Provider, ModelFactory]
"""A model: a model string (``"openai:gpt-4o-mini"``, ``"offline"``), a provider, or a
function ``(case, repeat) -> Provider`` making one per sample (a scripted model per case)."""

CassetteMode = Literal["auto", "record", "replay"]


class Models:
    """Model strings made into providers once per run (and closed after it), through the
    run's cassette when it has one: a model string records there or replays from it."""

    def __init__(self, cassette: Cassette | None) -> None:
        self.cassette = cassette
        self.made: dict[str, Provider] = {}
        self.clients: list[Any] = []  # the cassette's clients: the adapters do not own them

    def resolve(self, spec: str | Provider) -> Provider:
        if not isinstance(spec, str):
            return spec
        if spec in self.made:
            return self.made[spec]
        if spec == "offline":
            provider: Provider = OfflineProvider()
        else:
            from ..providers import get_provider

            options: dict[str, Any] = {}
            if self.cassette is not None:
                options["client"] = self.cassette.client()
                self.clients.append(options["client"])
                if not self.cassette.recording:
                    # replaying: no request leaves the machine, so no key is needed (nor read)
                    options["api_key"] = "cassette-replay"
            provider = get_provider(spec, **options)
        self.made[spec] = provider
        return provider

    async def aclose(self) -> None:
        for provider in self.made.values():
            closer = getattr(provider, "aclose", None)
            if closer is not None:
                await closer()
        self.made.clear()
        for client in self.clients:
            await client.aclose()
        self.clients.clear()


def _label(spec: Any) -> str:
    if isinstance(spec, str):
        return spec
    name, model = getattr(spec, "name", None), getattr(spec, "model", None)
    if isinstance(name, str) and isinstance(model, str):
        return f"{name}:{model}"
    raise ConfigurationError(
        f"model {spec!r} needs a label: give models as a mapping, {{'label': model}}"
    )


class EvalRun:
    """One run of a dataset on a target. ``await run.run()`` returns the
    :class:`~treadle.evals.EvalReport`; :meth:`cancel` stops it and ``run()`` returns
    what finished (``report.cancelled``); :meth:`report` is what finished so far at any
    time (after an outer cancellation or Ctrl-C too).

    Args:
        dataset: The cases.
        target: An Agent, or a function of the model returning one (:data:`Target`).
        models: The models to compare, side by side: a list of model strings or providers,
            or a mapping ``{label: model}`` (a model may be a function ``(case, repeat) ->
            Provider``). None: an Agent target's own model (a function target then needs
            every case to have a ``script``).
        repeat: Samples per case and model (pass@k, mean and spread come from them).
        concurrency: Samples running at once.
        timeout_s: A sample's time limit (a case's ``timeout_s`` wins); past it the
            sample ends with ``error`` and scores 0.
        pass_k: The k of pass@k to report (default: 1 and ``repeat``).
        progress: True: a progress bar on standard error (``rich`` when installed, else a
            line per sample); or a function ``(done, total, sample)``.
        cassette: A file model strings record to / replay from (``treadle.testing.Cassette``;
            ``cassette_mode`` "auto": record when the file is missing, else replay).
        tracing: OpenTelemetry spans (default: on when ``opentelemetry`` is installed; the
            global tracer provider unless ``tracer_provider`` is given).
    """

    def __init__(
        self,
        dataset: Cases,
        target: Target,
        *,
        models: Sequence[str | Provider] | Mapping[str, ModelSpec] | None = None,
        repeat: int = 1,
        concurrency: int = 4,
        timeout_s: float | None = None,
        pass_k: Sequence[int] | None = None,
        progress: bool | Progress | None = None,
        cassette: str | Path | Cassette | None = None,
        cassette_mode: CassetteMode = "auto",
        tracing: bool | None = None,
        tracer_provider: Any = None,
    ) -> None:
        if not isinstance(dataset, Cases):
            raise UsageError(f"EvalRun needs a Dataset, got {type(dataset).__name__}")
        if not dataset.cases:
            raise ConfigurationError(f"dataset {dataset.name!r} has no cases")
        if not callable(target):
            from ..agent import Agent

            if not isinstance(target, Agent):
                raise UsageError(
                    f"the target is an Agent or a function of the model returning one, "
                    f"not {type(target).__name__}"
                )
        if repeat < 1 or concurrency < 1:
            raise ConfigurationError("repeat and concurrency must be at least 1")
        if timeout_s is not None and timeout_s <= 0:
            raise ConfigurationError("timeout_s must be positive")
        for case in dataset.cases:
            if not dataset.evaluators_for(case):
                raise ConfigurationError(
                    f"case {case.name!r} has no evaluators (neither its own nor the "
                    "dataset's): give Case(evaluators=[...]) or Dataset(evaluators=[...])"
                )
        self.dataset = dataset
        self.target = target
        self.repeat = repeat
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.pass_k = sorted(set(pass_k or (1, repeat)))
        if isinstance(cassette, (str, Path)):
            cassette = Cassette(cassette, mode=cassette_mode)
        self.cassette = cassette
        self._models = Models(cassette)
        self.models = self._model_list(models)
        self.progress = make_progress(progress)
        use_tracing = tracing_available() if tracing is None else tracing
        self.tracing = EvalTracing(tracer_provider) if use_tracing else None
        self.specs = [
            SampleSpec(index, case, label, provider, r)
            for index, (r, case, (label, provider)) in enumerate(
                (r, case, m) for r in range(repeat) for case in dataset.cases for m in self.models
            )
        ]
        self._done: dict[int, SampleResult] = {}
        self._scope: anyio.CancelScope | None = None
        self._started_at = ""
        self._started = 0.0
        self._duration = 0.0

    def _model_list(
        self, models: Sequence[str | Provider] | Mapping[str, ModelSpec] | None
    ) -> list[tuple[str, Callable[[Case, int], Provider | None]]]:
        from ..agent import Agent

        if models is None:
            if isinstance(self.target, Agent):
                return [(_label(self.target.provider), lambda case, repeat: None)]
            if all(c.script for c in self.dataset.cases):
                return [("scripted", lambda case, repeat: None)]
            raise ConfigurationError(
                "the target is a function of the model and no model was given: pass "
                "models=[...] (or --model), or give every case a script"
            )
        if isinstance(models, (str, Provider)) or callable(models):
            raise UsageError("models is a list (or a mapping of labels to models)")
        pairs = list(models.items()) if isinstance(models, Mapping) else [
            (_label(m), m) for m in models
        ]  # fmt: skip
        if not pairs:
            raise ConfigurationError("models is empty: give at least one model")
        labels = [label for label, _ in pairs]
        if len(set(labels)) != len(labels):
            raise ConfigurationError(
                f"two models have one label in {labels}: give a mapping of labels"
            )
        return [(label, self._provider_of(spec)) for label, spec in pairs]

    def _provider_of(self, spec: ModelSpec) -> Callable[[Case, int], Provider | None]:
        if isinstance(spec, str):
            return lambda case, repeat: self._models.resolve(spec)
        if hasattr(spec, "stream"):
            provider: Provider = spec  # type: ignore[assignment]
            return lambda case, repeat: provider
        if callable(spec):
            return spec
        raise UsageError(
            f"a model is a model string, a provider or a function (case, repeat) -> provider, "
            f"not {spec!r}"
        )

    @property
    def total(self) -> int:
        return len(self.specs)

    def cancel(self) -> None:
        """Stop the run (from a task of its event loop): samples in progress end, and
        :meth:`run` returns the report of those that finished."""
        if self._scope is not None:
            self._scope.cancel()

    async def run(self) -> EvalReport:
        self._started_at = datetime.datetime.now(datetime.timezone.utc).isoformat()
        self._started = anyio.current_time()
        self.progress.start(self.total)
        try:
            with anyio.CancelScope() as self._scope:
                if self.tracing is None:
                    await self._all()
                else:
                    labels = [label for label, _ in self.models]
                    with self.tracing.run_span(self.dataset.name, labels, self.repeat):
                        await self._all()
        finally:
            self._duration = anyio.current_time() - self._started
            self.progress.stop()
            with anyio.CancelScope(shield=True):
                await self._models.aclose()
        return self.report()

    async def _all(self) -> None:
        """``concurrency`` workers taking the samples in order (the first repeat of every
        case first): with one worker the order is the same on every run."""
        queue = iter(self.specs)

        async def worker() -> None:
            for spec in queue:  # shared: each worker takes the next sample
                await self._one(spec)

        async with anyio.create_task_group() as tg:
            for _ in range(min(self.concurrency, len(self.specs))):
                tg.start_soon(worker)

    async def _one(self, spec: SampleSpec) -> None:
        evaluators = self.dataset.evaluators_for(spec.case)
        hooks = [self.tracing.hook] if self.tracing is not None else []
        if self.tracing is None:
            result, _ = await self._sample(spec, evaluators, hooks)
        else:
            with self.tracing.case_span(spec.case.name, spec.model, spec.repeat) as span:
                result, _ = await self._sample(spec, evaluators, hooks)
                self.tracing.finish(span, result)
        self._done[spec.index] = result
        self.progress.advance(len(self._done), self.total, result)

    async def _sample(self, spec: SampleSpec, evaluators: Any, hooks: Any) -> Any:
        return await run_sample(
            spec,
            self.target,
            evaluators,
            timeout_s=self.timeout_s,
            resolve_model=self._models.resolve,
            hooks=hooks,
        )

    def report(self) -> EvalReport:
        """What finished so far, as a report (``cancelled`` while samples are missing)."""
        cases: list[CaseResult] = []
        unfinished = [
            Unfinished(case=s.case.name, model=s.model, repeat=s.repeat)
            for s in self.specs
            if s.index not in self._done
        ]
        labels = [label for label, _ in self.models]
        for case in self.dataset.cases:
            for label in labels:
                samples = sorted(
                    (r for r in self._done.values() if r.case == case.name and r.model == label),
                    key=lambda r: r.repeat,
                )
                if not samples:
                    continue
                cases.append(
                    CaseResult.of(
                        samples,
                        self.pass_k,
                        case=case.name,
                        model=label,
                        tags=list(case.tags),
                        metadata=dict(case.metadata),
                        input=[t if isinstance(t, str) else t.text for t in case.turns],
                        expected_output=_jsonable(case.expected_output),
                    )
                )
        summaries = [
            ModelSummary.of(label, [c for c in cases if c.model == label])
            for label in labels
            if any(c.model == label for c in cases)
        ]
        duration = self._duration or (
            anyio.current_time() - self._started if self._started else 0.0
        )
        return EvalReport(
            name=self.dataset.name,
            models=labels,
            repeat=self.repeat,
            started_at=self._started_at,
            duration_s=duration,
            cancelled=bool(unfinished),
            unfinished=unfinished,
            cases=cases,
            summaries=summaries,
        )


def _jsonable(value: Any) -> Any:

    return as_json(value)


async def evaluate(
    dataset: Cases,
    target: Target,
    *,
    baseline: EvalReport | str | Path | None = None,
    threshold: float = 0.0,
    **options: Any,
) -> EvalReport:
    """Run ``dataset`` on ``target`` (options: :class:`EvalRun`) and return the report,
    compared with ``baseline`` (a report or its JSON file) when given."""
    report = await EvalRun(dataset, target, **options).run()
    if baseline is not None:
        report.compare(baseline, threshold=threshold)
    return report


def evaluate_sync(dataset: Cases, target: Target, **options: Any) -> EvalReport:
    """:func:`evaluate` from code that is not async; inside a running event loop (a
    notebook cell) it runs on a fresh loop in a worker thread."""
    from ..agent.sync import run_blocking

    return run_blocking(lambda: evaluate(dataset, target, **options))

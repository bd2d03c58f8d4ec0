"""``treadle eval evals.py``: run a dataset on an agent, print the table, write the JSON and
HTML reports, compare with a baseline (``treadle.evals``)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path
from typing import Any, Literal

from .._signals import Signal

DATA_FILES = (".yaml", ".yml", ".json", ".jsonl")


class _Bad(Signal):
    """A configuration mistake: one line on standard error, exit status 2."""


def _load_module(path: Path) -> Any:
    if not path.is_file():
        raise _Bad(f"no file at {path}")
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # the file's own imports (its agent module) work
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    spec = importlib.util.spec_from_file_location(f"treadle_eval_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise _Bad(f"{path} cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _pick(module: Any, name: str | None, kind: type, what: str, defaults: tuple[str, ...]) -> Any:
    if name:
        if not hasattr(module, name):
            raise _Bad(f"{module.__file__} has no {name!r}")
        return getattr(module, name)
    for default in defaults:
        value = getattr(module, default, None)
        if isinstance(value, kind):
            return value
    found = {k: v for k, v in vars(module).items() if isinstance(v, kind) and not k.startswith("_")}
    if len(found) == 1:
        return next(iter(found.values()))
    if not found:
        raise _Bad(f"{module.__file__} defines no {what}")
    raise _Bad(f"{module.__file__} defines several {what}s ({', '.join(found)}): choose one")


def _target(module: Any, name: str | None) -> Any:
    from ..agent import Agent

    if name and not hasattr(module, name):
        raise _Bad(f"{module.__file__} has no {name!r}")
    for attr in [name] if name else ["agent", "target", "make_agent"]:
        if attr and hasattr(module, attr):
            value = getattr(module, attr)
            if isinstance(value, Agent) or callable(value):
                return value
            raise _Bad(
                f"{attr} is a {type(value).__name__}: give an Agent or a function of the model"
            )
    agents = [v for v in vars(module).values() if isinstance(v, Agent)]
    if len(agents) == 1:
        return agents[0]
    raise _Bad(
        "no agent to evaluate: define `agent` (an Agent, or a function taking the model and "
        "returning one) in the file, or name it with --target (or --agent module:attr)"
    )


def _import_ref(ref: str) -> Any:
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise _Bad(f"--agent {ref!r}: use the form module:attribute")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise _Bad(f"--agent {ref!r}: {exc}") from None
    return value


def load(args: argparse.Namespace) -> tuple[Any, Any]:
    """The dataset and the target the arguments name."""
    from ..evals import Dataset

    path = Path(args.file)
    if path.suffix.lower() in DATA_FILES:
        dataset = Dataset.from_file(path)
        if not args.agent:
            raise _Bad(f"{path} holds cases only: name the agent with --agent module:agent")
        target = _import_ref(args.agent)
    else:
        module = _load_module(path)
        dataset = _pick(module, args.dataset, Dataset, "dataset", ("dataset",))
        target = _import_ref(args.agent) if args.agent else _target(module, args.target)
    if args.tag or args.case:
        dataset = dataset.filter(tags=args.tag or None, names=args.case or None)
        if not dataset.cases:
            raise _Bad(f"no case has the tags {args.tag}")
    return dataset, target


def _models(args: argparse.Namespace, target: Any) -> list[str] | None:
    from ..agent import Agent

    if args.model:
        return list(args.model)
    env = os.environ.get("TREADLE_MODEL")
    if env and not isinstance(target, Agent):
        return [env]
    return None


def cmd_eval(args: argparse.Namespace) -> int:
    import anyio

    from ..errors import ConfigurationError, MissingExtra
    from ..evals import EvalReport, EvalRun

    try:
        dataset, target = load(args)
        if inspect.isclass(target):
            raise _Bad(f"{target.__name__} is a class: give an Agent or a function of the model")
        baseline = EvalReport.load(args.baseline) if args.baseline else None
        cassette_mode: Literal["auto", "record", "replay"] = (
            "record" if args.record else "replay" if args.replay else "auto"
        )
        run = EvalRun(
            dataset,
            target,
            models=_models(args, target),
            repeat=args.repeat,
            concurrency=args.concurrency,
            timeout_s=args.timeout,
            progress=not args.quiet,
            cassette=args.cassette,
            cassette_mode=cassette_mode,
        )
    except (_Bad, ValueError, TypeError, FileNotFoundError, MissingExtra) as exc:
        print(f"treadle eval: {exc}", file=sys.stderr)
        return 2
    interrupted = False
    try:
        report = anyio.run(run.run)
    except KeyboardInterrupt:
        interrupted = True
        report = run.report()
        print(
            "\ntreadle eval: interrupted; the samples that finished are reported", file=sys.stderr
        )
    except ConfigurationError as exc:
        print(f"treadle eval: {exc}", file=sys.stderr)
        return 2
    if baseline is not None:
        report.compare(baseline, threshold=args.threshold)
    report.print()
    if args.json:
        print(f"wrote {report.save(args.json, events=args.events)}", file=sys.stderr)
    if args.html:
        print(f"wrote {report.write_html(args.html)}", file=sys.stderr)
    if interrupted:
        return 130
    if report.comparison is not None and report.comparison.regressed:
        return 1
    if args.fail_under is not None and report.pass_rate < args.fail_under:
        print(
            f"treadle eval: {report.pass_rate:.0%} of the samples passed, under "
            f"--fail-under {args.fail_under:.0%}",
            file=sys.stderr,
        )
        return 1
    return 0


def add_parser(sub: Any) -> None:
    ev = sub.add_parser(
        "eval",
        help="run a dataset of cases on an agent and score it (treadle.evals)",
        description=(
            "Run FILE's dataset on its agent and print a table of scores. FILE is a Python "
            "file defining `dataset` (a treadle.evals.Dataset) and `agent` (an Agent, or a "
            "function taking the model and returning one), or a dataset file (.yaml, .json, "
            ".jsonl) with --agent module:agent. Exit status: 0 done, 1 a regression against "
            "--baseline (or under --fail-under), 2 a configuration error, 130 interrupted "
            "(what finished is still reported)."
        ),
    )
    ev.add_argument("file", help="evals.py, or a dataset file (.yaml .yml .json .jsonl)")
    ev.add_argument(
        "--model",
        "-m",
        action="append",
        default=[],
        help="a model string; repeat it to compare models side by side (default: the "
        "agent's own, or $TREADLE_MODEL for a function of the model)",
    )
    ev.add_argument("--agent", help="the agent as module:attribute (with a dataset file)")
    ev.add_argument("--target", help="the agent's name in FILE (default: agent)")
    ev.add_argument("--dataset", help="the dataset's name in FILE (default: dataset)")
    ev.add_argument("--repeat", "-n", type=int, default=1, help="samples per case and model")
    ev.add_argument("--concurrency", "-j", type=int, default=4, help="samples at once (4)")
    ev.add_argument("--timeout", type=float, metavar="SECONDS", help="a sample's time limit")
    ev.add_argument("--tag", action="append", default=[], help="only cases with this tag")
    ev.add_argument("--case", action="append", default=[], help="only this case (repeatable)")
    ev.add_argument("--baseline", metavar="JSON", help="a report to compare with (--json of a run)")
    ev.add_argument(
        "--threshold",
        type=float,
        default=0.0,
        help="a case regresses when its score drops by more than this (default 0)",
    )
    ev.add_argument("--fail-under", type=float, metavar="RATE", help="exit 1 below this pass rate")
    ev.add_argument("--json", metavar="PATH", help="write the report as JSON (a baseline)")
    ev.add_argument("--events", action="store_true", help="keep every event in the JSON")
    ev.add_argument("--html", metavar="PATH", help="write the report as one HTML page")
    ev.add_argument(
        "--cassette",
        metavar="PATH",
        help="record model calls here when it is missing, replay them when it exists",
    )
    mode = ev.add_mutually_exclusive_group()
    mode.add_argument("--record", action="store_true", help="always record the cassette")
    mode.add_argument("--replay", action="store_true", help="the cassette must exist")
    ev.add_argument("--quiet", "-q", action="store_true", help="no progress on standard error")

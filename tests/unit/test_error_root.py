"""One error root: every exception class treadle defines derives from ``TreadleError``,
and keeps the built-in base it had, so ``except ValueError`` clauses keep working."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from pathlib import Path

import pytest

import treadle
from treadle import ConfigurationError, TreadleError, UsageError
from treadle._signals import Signal
from treadle.cancellation import CancellationToken
from treadle.errors import MissingExtra, OutOfRange, StateError, UnknownName
from treadle.streaming import EventLog
from treadle.testing import ScriptedProvider


def treadle_modules() -> list[str]:
    """Every module of the package, extras included when installed (a missing extra is a
    module that cannot be imported, and is left out)."""
    names = []
    for info in pkgutil.walk_packages(treadle.__path__, "treadle."):
        if info.name.endswith("__main__"):  # running it is the CLI, not an import
            continue
        try:
            importlib.import_module(info.name)
        except MissingExtra:
            continue
        names.append(info.name)
    return names


def exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in treadle_modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__.startswith("treadle")
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


NOT_THE_LIBRARYS = {
    # the simulation's stand-in for a user's tool raising a BaseException: a user's error
    "treadle.simulation._world.SimAbort",
}


def test_every_exception_class_is_a_treadle_error_or_an_internal_signal() -> None:
    classes = exception_classes()
    assert len(classes) >= 25  # the walk found them (22 existed before the root)
    outside = sorted(
        name
        for name, cls in classes.items()
        if not issubclass(cls, (TreadleError, Signal)) and name not in NOT_THE_LIBRARYS
    )
    assert outside == [], f"derive these from treadle.errors.TreadleError: {outside}"
    both = sorted(
        n for n, c in classes.items() if issubclass(c, TreadleError) and issubclass(c, Signal)
    )
    assert both == []


def _private(qualified: str) -> bool:
    return any(part.startswith("_") for part in qualified.split("."))


def test_internal_signals_are_outside_the_tree_and_private() -> None:
    """The loop's own control flow (a hook failed, a tool's BaseException held until
    agent_end, a limit hit mid-stream ...) never passes for a public error: ``except
    TreadleError`` in an application must not catch one, and no public module exports one."""
    signals = {n: c for n, c in exception_classes().items() if issubclass(c, Signal)}
    names = {c.__name__ for c in signals.values()}
    assert {"HookFailed", "ToolRaised", "RunLimitHit", "CompactionCancelled"} <= names
    for name, cls in signals.items():
        assert not issubclass(cls, TreadleError), name
        where = f"{cls.__module__}.{cls.__qualname__}"
        assert _private(where), where
    for module in treadle_modules():
        if _private(module):
            continue
        values = vars(importlib.import_module(module))
        exported = [values.get(n) for n in values.get("__all__", ())]
        assert not [c for c in exported if c in signals.values()], module


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("ToolArgumentsError", ValueError),
        ("AgentBusy", RuntimeError),
        ("ConfigurationError", ValueError),
        ("UsageError", TypeError),
        ("MissingExtra", ImportError),
        ("StateError", RuntimeError),
        ("OutOfRange", IndexError),
        ("UnknownName", KeyError),
    ],
)
def test_the_built_in_bases_are_kept(name: str, builtin: type[Exception]) -> None:
    classes = {cls.__name__: cls for cls in exception_classes().values()}
    assert issubclass(classes[name], builtin) and issubclass(classes[name], TreadleError)


def test_the_root_is_exported_and_catches_a_real_failure() -> None:
    from treadle.sessions import MemoryStore

    assert treadle.TreadleError is TreadleError and "TreadleError" in treadle.__all__
    with pytest.raises(TreadleError):
        MemoryStore().load("no-such-session")


# ---------------------------------------------------------------- no bare built-in raise

SRC = Path(treadle.__file__).parent
BARE = {"ValueError", "TypeError", "RuntimeError", "KeyError", "IndexError"}
VALIDATORS = {"field_validator", "model_validator", "validator", "root_validator"}

# A directory (ending in "/") or (file, function) whose bare raises are deliberate, and why.
ALLOWED: dict[str | tuple[str, str], str] = {
    "simulation/_world.py": (
        "the simulation's stand-ins for a user's tools and hooks, failing on purpose"
    ),
    ("sessions/jsonl.py", "_apply"): (
        "internal to the JSONL parser, which catches it at once and raises SessionCorrupt"
    ),
    ("ext/plan_mode.py", "exit_plan_mode"): (
        "raised inside a tool function: the model reads it as the tool's error result"
    ),
    ("ext/skills.py", "read_skill"): (
        "raised inside a tool function: the model reads it as the tool's error result"
    ),
}


def _validator(node: ast.AST) -> bool:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in VALIDATORS:
            return True
    return False


def bare_raises(tree: ast.AST) -> list[tuple[int, str, str]]:
    """``(line, enclosing function, exception)`` for each ``raise ValueError(...)`` (or
    ``TypeError``, ``RuntimeError``, ``KeyError``, ``IndexError``, called or not), except
    a ``ValueError`` in a pydantic validator, which pydantic turns into ValidationError."""
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, function: str, in_validator: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function, in_validator = node.name, in_validator or _validator(node)
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = getattr(target, "id", "")
            if name in BARE and not (in_validator and name == "ValueError"):
                found.append((node.lineno, function, name))
        for child in ast.iter_child_nodes(node):
            visit(child, function, in_validator)

    visit(tree, "<module>", False)
    return found


def _allowed(path: str, function: str) -> bool:
    return (path, function) in ALLOWED or any(
        isinstance(key, str) and path.startswith(key) for key in ALLOWED
    )


def test_the_scan_sees_a_bare_raise_and_spares_a_validator() -> None:
    source = (
        "def f():\n    raise ValueError('x')\n"
        "class M:\n"
        "    @field_validator('a')\n    def v(cls, a):\n"
        "        raise ValueError('wrapped by pydantic')\n"
        "    @model_validator(mode='after')\n    def w(self):\n        raise TypeError\n"
    )
    assert bare_raises(ast.parse(source)) == [(2, "f", "ValueError"), (9, "w", "TypeError")]


@pytest.fixture(scope="module")
def library_raises() -> list[tuple[str, int, str, str]]:
    """``(path, line, enclosing function, exception)`` for each bare raise in treadle's
    source: scanned once for the two tests below (about 1.7 s of CPU a scan)."""
    found = []
    for file in sorted(SRC.rglob("*.py")):
        path = file.relative_to(SRC).as_posix()
        tree = ast.parse(file.read_text(encoding="utf-8"))
        found += [(path, *raised) for raised in bare_raises(tree)]
    return found


def test_the_library_raises_no_bare_built_in_exception(
    library_raises: list[tuple[str, int, str, str]],
) -> None:
    """A deliberate error is a TreadleError (ConfigurationError for a bad value,
    UsageError for a wrong type or call, StateError or a more specific class for a wrong
    state), so ``except treadle.TreadleError`` catches it; see docs/errors.md."""
    offenders = [
        f"src/treadle/{path}:{line} raise {name} in {function}()"
        for path, line, function, name in library_raises
        if not _allowed(path, function)
    ]
    assert offenders == [], "raise a treadle.errors class instead:\n" + "\n".join(offenders)


def test_every_allowlist_entry_still_matches_something(
    library_raises: list[tuple[str, int, str, str]],
) -> None:
    """An entry left over after its raise was converted would hide a new one."""
    used: set[str | tuple[str, str]] = set()
    for path, _, function, _ in library_raises:
        used.update(k for k in ALLOWED if k == (path, function))
        used.update(k for k in ALLOWED if isinstance(k, str) and path.startswith(k))
    stale = [k for k in ALLOWED if k not in used and isinstance(k, tuple)]  # not the dirs
    assert stale == [], f"remove these allowlist entries: {stale}"


def _branch_too_far() -> None:
    treadle.Agent(ScriptedProvider("hi")).branch(at_index=5)


def _unknown_profile() -> None:
    from treadle.agent import Profile
    from treadle.ext.profiles import Profiles

    Profiles([Profile(name="coder")]).switch("writer")


def _closed_log() -> None:
    from treadle.streaming import KeyedLog

    log: KeyedLog[int, int] = KeyedLog(key=lambda item: item)
    log.close()
    log.add(1)


@pytest.mark.parametrize(
    ("mistake", "cls", "builtin"),
    [
        (lambda: treadle.loop.ToolExecution.batched(0), ConfigurationError, ValueError),
        (lambda: EventLog(max_events=0), ConfigurationError, ValueError),
        (lambda: CancellationToken().cancel("later"), ConfigurationError, ValueError),  # type: ignore[arg-type]
        (lambda: treadle.Agent(ScriptedProvider("hi"), api_key="k"), UsageError, TypeError),
        (_branch_too_far, OutOfRange, IndexError),
        (_unknown_profile, UnknownName, KeyError),
        (_closed_log, StateError, RuntimeError),
    ],
)
def test_converted_errors_are_caught_by_the_root_and_by_their_old_base(
    mistake: Callable[[], object], cls: type[Exception], builtin: type[Exception]
) -> None:
    with pytest.raises(TreadleError) as caught:
        mistake()
    assert isinstance(caught.value, cls) and isinstance(caught.value, builtin)

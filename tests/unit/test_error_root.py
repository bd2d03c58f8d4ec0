"""One error root: every exception class treadle defines derives from ``TreadleError``,
and keeps the built-in base it had, so ``except ValueError`` clauses keep working."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import treadle
from treadle import MissingExtra, TreadleError


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


def test_every_exception_class_is_a_treadle_error() -> None:
    classes = exception_classes()
    assert len(classes) >= 25  # the walk found them (22 existed before the root)
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, TreadleError))
    assert outside == [], f"derive these from treadle.errors.TreadleError: {outside}"


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("ToolArgumentsError", ValueError),
        ("AgentBusy", RuntimeError),
        ("ConfigurationError", ValueError),
        ("UsageError", TypeError),
        ("MissingExtra", ImportError),
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

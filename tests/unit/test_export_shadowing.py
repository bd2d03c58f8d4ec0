"""A name a package exports is never replaced by a submodule of the same name (importing
a submodule binds it on its package: ``treadle.context`` once exported the function
``compact`` beside a submodule ``compact``, now ``compacting``)."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import treadle


def test_compact_is_the_function_even_after_its_submodule_was_imported() -> None:
    code = (
        "import importlib; importlib.import_module('treadle.context.compacting')\n"
        "from treadle.context import compact\n"
        "print(callable(compact), type(compact).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "function"]


def test_no_package_exports_a_name_one_of_its_submodules_has() -> None:
    clashes = {}
    for info in pkgutil.walk_packages(treadle.__path__, "treadle."):
        if not info.ispkg or info.name.endswith("__main__"):
            continue
        try:
            package = importlib.import_module(info.name)
        except ImportError:  # an extra that is not installed
            continue
        submodules = {s.name for s in pkgutil.iter_modules(package.__path__)}
        clash = submodules & set(getattr(package, "__all__", ()))
        if clash:
            clashes[info.name] = clash
    assert clashes == {}

"""The house rules, checked on the source: one-way imports, no cycles, small modules.

Imports are read with ``ast``: module level, inside functions, and under ``if
TYPE_CHECKING:`` too (a type-only import back up is still a tangle for the reader). Imports
by string count as well: ``importlib.import_module("treadle.x")``, ``__import__(...)``
(relative ones resolved against ``__package__`` / ``__name__``, an f-string by its fixed
prefix), and the ``"treadle.x"`` module names of a lazy-import table in a module that
calls ``import_module`` — reaching a module by name is still depending on it.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

# the tests share one parse of the source (imports_of is cached): one worker runs them all
pytestmark = pytest.mark.xdist_group("import_graph")

SRC = Path(__file__).resolve().parents[2] / "src" / "treadle"
MAX_LINES = 600


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


_IMPORTERS = {"import_module", "__import__"}
_MODULE_NAME = re.compile(r"treadle(\.\w+)+")


def _resolve(spec: str, anchor: str) -> str:
    """A module name given to ``import_module``, absolute (``".x"`` against ``anchor``)."""
    if not spec.startswith("."):
        return spec
    dots = len(spec) - len(spec.lstrip("."))
    base = anchor.split(".")
    base = base[: len(base) - (dots - 1)]
    rest = spec[dots:]
    return ".".join([*base, rest] if rest else base)


def string_imports(tree: ast.Module, name: str, package: str) -> set[str]:
    """The treadle modules a module reaches by name (see the module docstring)."""
    known = {"__name__": name, "__package__": package}
    found: set[str] = set()

    def text(node: ast.expr) -> str | None:
        """The fixed part of a module-name argument: a string, ``__name__``, or an
        f-string's pieces up to the first one only known at run time."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return known.get(node.id)
        if isinstance(node, ast.JoinedStr):
            fixed = ""
            for piece in node.values:
                value = piece.value if isinstance(piece, ast.FormattedValue) else piece
                part = text(value)
                if part is None:
                    return fixed.rpartition(".")[0] if "." in fixed.lstrip(".") else None
                fixed += part
            return fixed
        return None

    calls = False
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if called not in _IMPORTERS:
            continue
        calls = True
        spec = text(node.args[0])
        if spec is None:
            continue
        anchor = package
        if len(node.args) > 1 and (given := text(node.args[1])) is not None:
            anchor = given
        target = _resolve(spec, anchor)
        if target.startswith("treadle"):
            found.add(target)
    if calls:  # a lazy table: {"Agent": "treadle.agent", ...} looked up, then imported
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if _MODULE_NAME.fullmatch(node.value):
                    found.add(node.value)
    return found


@functools.cache
def imports_of(path: Path) -> frozenset[str]:
    """The treadle modules ``path`` imports at run time (resolved to module names); each
    file parsed once for the module's tests (one worker runs them all: ``pytestmark``)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            for child in ast.walk(node):
                if isinstance(child, ast.Import):
                    found.update(a.name for a in child.names if a.name.startswith("treadle"))
                elif isinstance(child, ast.ImportFrom):
                    if child.level:
                        base = package.split(".")
                        base = base[: len(base) - (child.level - 1)]
                        target = ".".join([*base, child.module] if child.module else base)
                    else:
                        target = child.module or ""
                    if not target.startswith("treadle"):
                        continue
                    found.add(target)
                    for alias in child.names:  # `from . import x` may import a submodule
                        found.add(f"{target}.{alias.name}")

    tree = ast.parse(path.read_text(encoding="utf-8"))
    visit(tree.body)
    found |= string_imports(tree, name, package)
    return frozenset(found)


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in SRC.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {t for t in imports_of(path) if t in modules and t != name}
        # importing a.b.c runs a and a.b first; those edges are real too, but a package's
        # own __init__ importing its children is how packages work, not a cycle to fix
        edges[name] = {t for t in targets if not name.startswith(t + ".")}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return found


def test_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_no_module_over_600_lines() -> None:
    long = {
        module_name(p): n
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these by job: {long}"


def test_layers_point_down() -> None:
    edges = graph()
    loop = {m: t for m, t in edges.items() if m.startswith("treadle.loop")}
    for module, targets in loop.items():
        bad = {
            t
            for t in targets
            if t.startswith(
                ("treadle.agent", "treadle.cli", "treadle.sessions", "treadle.streaming")
            )
            or (t.startswith("treadle.providers.") and t not in {"treadle.providers.base"})
        }
        assert not bad, f"{module} imports {bad}: the loop knows providers by their protocol"
    assert edges["treadle.errors"] == set(), "the error root imports nothing"
    for module, targets in edges.items():
        if module.startswith("treadle.types"):  # the error root is a leaf: any layer may
            assert all(t.startswith("treadle.types") or t == "treadle.errors" for t in targets)
    pure = SRC / "types"
    for path in pure.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "import httpx" not in text and "import anyio" not in text, path


EXTENSIONS = (
    "treadle.mcp",
    "treadle.otel",
    "treadle.ui",
    "treadle.ext",
    "treadle.durable",
    "treadle.a2a",
)
BUILDS_ON = {"treadle.a2a": {"treadle.ui"}}
"""An extension that serves HTTP builds on the web surfaces' public names (their guard)."""


def test_extensions_use_only_public_api() -> None:
    """An extension imports treadle's public packages (``treadle.agent``, ``treadle.loop``
    ...), never another package's modules or private names, and no other extension."""
    for module, targets in graph().items():
        own = next((e for e in EXTENSIONS if module == e or module.startswith(e + ".")), None)
        if own is None:
            continue
        for target in targets:
            if target == own or target.startswith(own + "."):
                continue
            assert target.count(".") <= 1 and "._" not in target, (
                f"{module} imports {target}: extensions use the public packages only"
            )
            if target in BUILDS_ON.get(own, ()):
                continue
            assert target not in EXTENSIONS, f"{module} imports another extension, {target}"


def test_evals_use_only_public_api() -> None:
    """``treadle.evals`` sits above the agent and the extensions and uses what an
    application would: public packages (``treadle.otel`` included), no private module, no
    CLI; ``treadle.agent.sync`` for running to the end from sync code. Nothing below it
    imports it."""
    allowed = {"treadle.agent.sync"}
    for module, targets in graph().items():
        if module.startswith("treadle.evals"):
            for target in targets:
                if target.startswith("treadle.evals") or target in allowed:
                    continue
                assert target.count(".") <= 1 and "._" not in target, (
                    f"{module} imports {target}: evals use the public packages only"
                )
                assert not target.startswith("treadle.cli"), f"{module} imports the CLI"
        elif not module.startswith("treadle.cli"):
            assert not any(t.startswith("treadle.evals") for t in targets), (
                f"{module} imports treadle.evals: only the CLI may"
            )


def test_imports_by_string_are_edges() -> None:
    """``importlib.import_module("treadle.ui.web")`` in the agent was the one import
    circle (agent <-> ui): read as an edge, a new one fails here."""
    source = (
        "import importlib\n"
        "from importlib import import_module\n"
        "_LAZY = {'Thing': 'treadle.sessions'}\n"
        "def a(): return importlib.import_module('treadle.ui.web')\n"
        "def b(): return import_module('.compaction', __package__)\n"
        "def c(): return __import__('treadle.mcp')\n"
        "def d(m): return import_module(f'{__name__}.{m}')\n"
        "def e(m): return import_module(m)\n"
    )
    found = string_imports(ast.parse(source), "treadle.loop.run", "treadle.loop")
    assert found == {
        "treadle.ui.web",
        "treadle.loop.compaction",
        "treadle.mcp",
        "treadle.loop.run",
        "treadle.sessions",
    }


def test_the_agent_reaches_no_surface_by_name() -> None:
    edges = graph()
    reached = {
        t
        for module, targets in edges.items()
        if module.startswith("treadle.agent")
        for t in targets
    }
    assert not {t for t in reached if t.startswith("treadle.ui")}, "the web UI takes an agent"

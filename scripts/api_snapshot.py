"""The public API as text: every name each public module exports (``__all__``), with its
signature, so a change to the public surface shows up as a diff in review.

    python scripts/api_snapshot.py            # print the snapshot
    python scripts/api_snapshot.py --check    # exit 1, with a diff, if it differs from the file
    python scripts/api_snapshot.py --update   # write tests/api/public_api.txt (make api-snapshot)

The text is the same on Python 3.10 to 3.13: annotations are shown as written in the source
(treadle's modules use ``from __future__ import annotations``, so they stay strings), and
values without a stable repr (objects, functions) are shown as ``...``. A module whose extra
is not installed gets a one-line section saying so; the test skips comparing it.
"""

from __future__ import annotations

import argparse
import difflib
import enum
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any, get_origin

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "api" / "public_api.txt"
PUBLIC = [
    "treadle",
    "treadle.a2a",
    "treadle.agent",
    "treadle.context",
    "treadle.durable",
    "treadle.errors",
    "treadle.evals",
    "treadle.ext.auto_skills",
    "treadle.ext.mcp_curation",
    "treadle.ext.memory",
    "treadle.ext.plan_mode",
    "treadle.ext.profiles",
    "treadle.ext.routing",
    "treadle.ext.skills",
    "treadle.ext.style",
    "treadle.ext.workers",
    "treadle.ext.workflow",
    "treadle.loop",
    "treadle.mcp",
    "treadle.otel",
    "treadle.providers",
    "treadle.sessions",
    "treadle.streaming",
    "treadle.testing",
    "treadle.tools",
    "treadle.types",
    "treadle.ui",
    "treadle.ui.ag_ui",
    "treadle.ui.agent_server",
    "treadle.ui.mcp_server",
    "treadle.ui.openai_api",
    "treadle.ui.vercel_ai",
]
NOT_INSTALLED = "(not installed here: its extra is missing)"
_SIMPLE = (str, int, float, bool, type(None), bytes)
_ALIAS_MODULES = ("typing", "typing_extensions", "types", "collections.abc")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def value(obj: Any) -> str:
    """A default or constant as text: literals and tuples/lists/frozensets of them exactly,
    enum members by name, anything else ``...`` (its repr may name an address)."""
    if isinstance(obj, enum.Enum):
        return f"{type(obj).__name__}.{obj.name}"
    if isinstance(obj, _SIMPLE):
        return repr(obj)
    if isinstance(obj, (tuple, list)) and all(isinstance(v, _SIMPLE) for v in obj):
        return repr(obj)
    if isinstance(obj, frozenset) and all(isinstance(v, _SIMPLE) for v in obj):
        return f"frozenset({sorted(obj, key=repr)!r})"
    return "..."


def annotation(obj: Any) -> str:
    if isinstance(obj, str):
        return obj
    forward = getattr(obj, "__forward_arg__", None)  # ForwardRef: its repr varies by version
    if isinstance(forward, str):
        return forward
    if isinstance(obj, type):
        return obj.__qualname__
    text = _ADDRESS.sub("", repr(obj))
    return text.replace("typing.", "").replace("collections.abc.", "")


def signature(obj: Any) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    parts: list[str] = []
    star_done = False
    for param in sig.parameters.values():
        if param.kind is param.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if param.kind is param.VAR_POSITIONAL:
            star_done = True
        prefix = {param.VAR_POSITIONAL: "*", param.VAR_KEYWORD: "**"}.get(param.kind, "")
        text = prefix + param.name
        if param.annotation is not param.empty:
            text += f": {annotation(param.annotation)}"
        if param.default is not param.empty:
            text += f" = {value(param.default)}"
        parts.append(text)
        if param.kind is param.POSITIONAL_ONLY and (
            list(sig.parameters.values()).index(param) + 1 == len(sig.parameters)
            or list(sig.parameters.values())[list(sig.parameters.values()).index(param) + 1].kind
            is not param.POSITIONAL_ONLY
        ):
            parts.append("/")
    result = f"({', '.join(parts)})"
    if sig.return_annotation is not sig.empty:
        result += f" -> {annotation(sig.return_annotation)}"
    return result


def _own_annotations(cls: type) -> dict[str, Any]:
    """The class's own field annotations, unevaluated (strings, as in the source)."""
    return dict(inspect.get_annotations(cls))


def describe_class(name: str, cls: type) -> list[str]:
    bases = ", ".join(b.__qualname__ for b in cls.__bases__ if b is not object)
    lines = [f"class {name}({bases})" if bases else f"class {name}"]
    if issubclass(cls, enum.Enum):
        lines += [f"    {m.name} = {value(m.value)}" for m in cls]
        return lines
    is_model = hasattr(cls, "model_fields")
    if not is_model and ("__init__" in cls.__dict__ or "__new__" in cls.__dict__):
        lines.append(f"    __init__{signature(cls)}")
    for field, hint in _own_annotations(cls).items():
        if field.startswith("_") or "ClassVar" in str(hint):
            continue
        line = f"    {field}: {annotation(hint)}"
        if is_model:
            info = cls.model_fields.get(field)  # type: ignore[attr-defined]
            if info is not None and not info.is_required():
                default = info.default if info.default_factory is None else ...
                line += f" = {value(default)}"
        lines.append(line)
    for member, obj in sorted(cls.__dict__.items()):
        if member.startswith("_") or (is_model and member.startswith("model_")):
            continue  # pydantic's own members vary with its version
        if isinstance(obj, property):
            lines.append(f"    property {member}")
        elif isinstance(obj, (classmethod, staticmethod)):
            kind = "classmethod" if isinstance(obj, classmethod) else "staticmethod"
            lines.append(f"    {kind} {member}{signature(obj.__func__)}")
        elif inspect.isfunction(obj):
            prefix = "async def" if inspect.iscoroutinefunction(obj) else "def"
            lines.append(f"    {prefix} {member}{signature(obj)}")
    return lines


def _is_alias(obj: Any) -> bool:
    """A type alias (``Callable[...]``, ``Annotated[...]``, ``X | Y``): its repr, and even
    whether ``inspect`` calls it a class, differ between Python versions."""
    if isinstance(obj, type) and get_origin(obj) is None:
        return False
    return get_origin(obj) is not None or type(obj).__module__ in _ALIAS_MODULES


def describe(name: str, obj: Any) -> list[str]:
    if _is_alias(obj):
        return [f"{name}: type alias"]
    if inspect.isclass(obj):
        return describe_class(name, obj)
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        prefix = "async def" if inspect.iscoroutinefunction(obj) else "def"
        return [f"{prefix} {name}{signature(obj)}"]
    if inspect.ismodule(obj):
        return [f"module {name}"]
    if callable(obj) and not isinstance(obj, _SIMPLE):
        return [f"{name}: {type(obj).__name__}{signature(obj)}"]
    shown = value(obj)
    return [f"{name} = {shown}" if shown != "..." else f"{name}: {type(obj).__name__}"]


def module_section(module_name: str) -> list[str]:
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return [f"## {module_name} {NOT_INSTALLED}"]
    lines = [f"## {module_name}"]
    for name in sorted(getattr(module, "__all__", [])):
        if name == "__version__":
            lines.append("__version__: str")
            continue
        lines += describe(name, getattr(module, name))
    return lines


def sections(text: str) -> dict[str, str]:
    """``{module: its section}`` of a snapshot's text (the header is not a section)."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = found.setdefault(line[3:].split(" ", 1)[0], [])
        if current is not None and line:
            current.append(line)
    return {module: "\n".join(lines) + "\n" for module, lines in found.items()}


def snapshot() -> str:
    header = (
        "# treadle's public API: generated by scripts/api_snapshot.py; do not edit by hand.\n"
        "# After a reviewed change to the public surface: make api-snapshot\n"
    )
    body = "\n\n".join("\n".join(module_section(m)) for m in PUBLIC)
    return header + "\n" + body + "\n"


def diff(expected: str, actual: str) -> str:
    return "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            "tests/api/public_api.txt (committed)",
            "the code now",
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--update", action="store_true", help=f"write {SNAPSHOT.name}")
    group.add_argument("--check", action="store_true", help="exit 1 when it differs")
    args = parser.parse_args(argv)
    text = snapshot()
    if NOT_INSTALLED in text and (args.update or args.check):
        missing = [line for line in text.splitlines() if NOT_INSTALLED in line]
        print(f"install every extra first (make .venv/.installed): {missing}", file=sys.stderr)
        return 2
    if args.update:
        SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
        SNAPSHOT.write_text(text, encoding="utf-8")
        print(f"wrote {SNAPSHOT.relative_to(ROOT)}")
        return 0
    if args.check:
        changes = diff(SNAPSHOT.read_text(encoding="utf-8"), text)
        print(changes or "the public API matches the snapshot")
        return 1 if changes else 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

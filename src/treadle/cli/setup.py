"""What the commands are built from: the model (``--model``, keys, offline) and the tools."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from .._signals import Signal
from ..providers.base import Provider

DEFAULT_MODELS = (
    ("OPENAI_API_KEY", "openai:gpt-4o-mini"),
    ("ANTHROPIC_API_KEY", "anthropic:claude-sonnet-4-5"),
    ("GEMINI_API_KEY", "gemini:gemini-2.5-flash"),
    ("GOOGLE_API_KEY", "gemini:gemini-2.5-flash"),
)
HOW_TO = (
    "No model configured. Pass --model (or set TREADLE_MODEL), e.g. openai:gpt-4o-mini with "
    "OPENAI_API_KEY (or --api-key), anthropic:claude-sonnet-4-5 with ANTHROPIC_API_KEY, "
    "ollama:llama3.2, or openai-compatible:MODEL@http://localhost:8000/v1; "
    "--model offline runs the labelled offline model."
)


def count(n: int, noun: str) -> str:
    """``1 message``, ``2 messages``: a count with its noun in the right number."""
    return f"{n} {noun if n == 1 else noun + 's'}"


class _NoModel(Signal):
    """No model was configured and the offline model was not asked for."""


def offline_delay() -> float:
    """Seconds between the offline model's streamed pieces: ``TREADLE_OFFLINE_DELAY``
    slows it down for demos (and for tests that interrupt an answer mid-stream)."""
    try:
        return max(0.0, float(os.environ.get("TREADLE_OFFLINE_DELAY", "0.005")))
    except ValueError:
        return 0.005


def resolve_model(
    spec: str | None,
    err: Any = None,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    require: bool = False,
) -> tuple[Provider, str]:
    """(provider, label) for --model / TREADLE_MODEL / a key in the environment / offline.

    With nothing configured, ``require=True`` (``treadle run``) raises :class:`_NoModel`;
    otherwise (``treadle chat``) the offline model is used and the user is told so."""
    err = err or sys.stderr
    spec = spec or os.environ.get("TREADLE_MODEL")
    if not spec:
        spec = next((model for var, model in DEFAULT_MODELS if os.environ.get(var)), None)
    if not spec and require:
        raise _NoModel(HOW_TO)
    if not spec or spec == "offline":
        from ..testing import OfflineProvider

        if spec != "offline":
            print(HOW_TO + " Using the offline model for now.", file=err)
        return OfflineProvider(delay=offline_delay()), "offline"
    from ..providers.registry import get_provider

    options = {k: v for k, v in (("api_key", api_key), ("base_url", base_url)) if v}
    return get_provider(spec, **options), spec


def load_tools(specs: Sequence[str]) -> list[Any]:
    """Tools named ``package.module:attribute`` (a function, a Tool, or a list of them);
    modules in the current directory are found too, as ``python -m`` would."""
    tools: list[Any] = []
    if specs and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    for spec in specs:
        module_name, _, attr = spec.partition(":")
        if not attr:
            raise SystemExit(f"--tool {spec!r}: use the form package.module:function")
        try:
            value = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            print(f"treadle: --tool {spec!r}: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        tools.extend(value if isinstance(value, (list, tuple)) else [value])
    return tools

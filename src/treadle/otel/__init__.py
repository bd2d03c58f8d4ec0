"""OpenTelemetry tracing and metrics for treadle runs (``pip install 'treadle[otel]'``).

::

    import treadle.otel
    tracing = treadle.otel.instrument(tracer_provider=provider)   # one line
    agent = Agent("openai:gpt-4o-mini", hooks=[tracing])

Spans follow the OpenTelemetry GenAI semantic conventions: ``invoke_agent`` per run,
``chat {model}`` per model call (retries as span events), ``execute_tool {tool}`` per tool
call, sub-agents nested under the tool call that started them. See docs/observability.md.
"""

from __future__ import annotations

from typing import Any

from ..errors import MissingExtra, install_hint

try:
    from opentelemetry import trace as _trace  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise MissingExtra(f"treadle.otel needs OpenTelemetry: {install_hint('otel')}") from exc

from .tracing import Tracing


def instrument(
    *,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    agent_name: str = "treadle",
    capture_content: bool = False,
) -> Tracing:
    """The hook that traces runs: pass it in ``Agent(hooks=[...])`` or
    ``AgentLoopConfig(hooks=[...])``. Without providers the global OpenTelemetry ones are
    used. ``capture_content=True`` records messages and tool arguments and results."""
    return Tracing(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        agent_name=agent_name,
        capture_content=capture_content,
    )


__all__ = ["Tracing", "instrument"]

"""OpenTelemetry traces of a run: spans per the GenAI semantic conventions, printed as a tree.

    pip install 'treadle[otel]' opentelemetry-sdk
    python examples/tracing.py

Point a real exporter (OTLP to Jaeger, Tempo, Honeycomb, Logfire ...) at the same
TracerProvider in an application; here the spans are kept in memory and printed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import treadle.otel
from treadle import Agent, AssistantMessage, ToolCall, tool
from treadle.providers import Provider, get_provider
from treadle.testing import ScriptedProvider, ScriptItem


def model_or_script(script: Sequence[ScriptItem]) -> Provider:
    """The model named by ``TREADLE_MODEL``; without one, a ScriptedProvider playing
    ``script`` (what a real model would plausibly answer), announced as offline: the
    example runs as it is, with no key and no network."""
    spec = os.environ.get("TREADLE_MODEL")
    if spec:
        return get_provider(spec)
    print("(offline: scripted model answers; set TREADLE_MODEL to use a real one)")
    return ScriptedProvider(script, name="offline", model="offline-script", delay=0.002)


@tool(category="info")
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def print_tree(spans: list, parent: int | None = None, depth: int = 0) -> None:
    for span in sorted(spans, key=lambda s: s.start_time):
        span_parent = span.parent.span_id if span.parent else None
        if span_parent != parent:
            continue
        wanted = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.tool.name")
        notes = {k.split(".")[-1]: v for k, v in span.attributes.items() if k in wanted}
        millis = (span.end_time - span.start_time) / 1e6
        print(f"{'  ' * depth}{span.name}  {millis:.1f} ms  {notes or ''}")
        print_tree(spans, span.context.span_id, depth + 1)


def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = treadle.otel.instrument(tracer_provider=provider, agent_name="calculator")

    model = model_or_script(
        [
            AssistantMessage(content=[ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})]),
            "2 + 3 = 5.",
        ]
    )
    agent = Agent(model, tools=[add], hooks=[tracing], system_prompt="Use the add tool.")
    result = agent.run_sync("What is 2 + 3?")
    print("answer:", result.text or f"({result.reason})")
    print_tree(list(exporter.get_finished_spans()))


if __name__ == "__main__":
    main()

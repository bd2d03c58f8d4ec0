"""treadle.otel with the OpenTelemetry SDK's in-memory exporter and metric reader: the span
tree, names and attributes of the GenAI conventions, errors, retries, cancellation,
sub-agents, content capture and metrics — on asyncio and trio."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.preloaded import Preloader

pytest.importorskip("opentelemetry.sdk", reason="the otel test extra is not installed")

import anyio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode

import treadle.otel
from treadle import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    CancellationToken,
    ToolCall,
    ToolResult,
    agent_loop,
    tool,
)
from treadle.loop import RetryPolicy
from treadle.testing import Fail, ScriptedProvider, Slow, WireFake

pytestmark = pytest.mark.anyio
MCP_SERVER = str(Path(__file__).parents[1] / "mcp" / "mcp_server.py")


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Telemetry:
    def __init__(self, **options: Any) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.hook = treadle.otel.instrument(
            tracer_provider=provider,
            meter_provider=MeterProvider(metric_readers=[self.reader]),
            **options,
        )

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def metric_points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        points: list[Any] = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    yield Telemetry()


def tool_turn() -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id="call_1", name="add", arguments={"a": 2, "b": 3})])


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_a_tool_calling_run_makes_the_conventional_span_tree(telemetry: Telemetry) -> None:
    fake = WireFake.openai([tool_turn(), "It is 5."])
    agent = Agent(fake.provider("gpt-4o-mini", api_key="k"), tools=[add], hooks=[telemetry.hook])
    result = await agent.run("2+3?")
    assert result.text == "It is 5."

    (run,) = telemetry.named("invoke_agent")
    chats = telemetry.named("chat")
    (call,) = telemetry.named("execute_tool")
    assert run.name == "invoke_agent treadle" and parent_of(run) is None
    assert [c.name for c in chats] == ["chat gpt-4o-mini", "chat gpt-4o-mini"]
    root = run.context.span_id
    assert all(parent_of(s) == root for s in [*chats, call])
    assert {s.context.trace_id for s in telemetry.spans} == {run.context.trace_id}

    first, second = chats
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.provider.name"] == "openai"
    assert first.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert first.attributes["gen_ai.response.model"] == "gpt-4o-mini"
    assert tuple(first.attributes["gen_ai.response.finish_reasons"]) == ("tool_calls",)
    assert tuple(second.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert first.attributes["gen_ai.usage.input_tokens"] > 0
    assert first.attributes["gen_ai.conversation.id"] == agent.session_id
    assert call.name == "execute_tool add"
    assert call.attributes["gen_ai.tool.name"] == "add"
    assert call.attributes["gen_ai.tool.call.id"] == "call_1"
    assert call.attributes["gen_ai.operation.name"] == "execute_tool"
    assert call.attributes["gen_ai.tool.type"] == "function"
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.usage.output_tokens"] == result.usage.output
    assert all(s.status.status_code != StatusCode.ERROR for s in telemetry.spans)
    assert "gen_ai.input.messages" not in first.attributes  # content is off by default


async def test_a_failed_call_marks_its_span_and_the_run(telemetry: Telemetry) -> None:
    fake = WireFake.openai([Fail(401)])
    agent = Agent(fake.provider("gpt-4o-mini", api_key="k"), hooks=[telemetry.hook])
    result = await agent.run("hi")
    assert result.reason == "error"
    (chat,) = telemetry.named("chat")
    (run,) = telemetry.named("invoke_agent")
    assert chat.status.status_code == StatusCode.ERROR
    assert chat.attributes["error.type"] == "auth"
    assert run.status.status_code == StatusCode.ERROR and run.attributes["error.type"] == "auth"


@tool
def lookup(name: str) -> str:
    """Look a customer up."""
    raise ValueError(f"no record for {name}")


def everything_recorded(telemetry: Telemetry) -> str:
    """Every name, attribute, status description and span event of the trace, as text."""
    parts = []
    for span in telemetry.spans:
        parts += [span.name, str(dict(span.attributes or {})), str(span.status.description)]
        parts += [f"{e.name} {dict(e.attributes or {})}" for e in span.events]
    return "\n".join(parts)


@pytest.mark.parametrize("capture", [False, True])
async def test_a_failing_tools_error_text_is_recorded_only_with_content_capture(
    capture: bool,
) -> None:
    telemetry = Telemetry(capture_content=capture)
    call = ToolCall(id="call_1", name="lookup", arguments={"name": "PRIVATE-alice"})
    model = ScriptedProvider([AssistantMessage(content=[call]), "Not found."])
    agent = Agent(model, tools=[lookup], hooks=[telemetry.hook])
    result = await agent.run("find alice")
    assert "no record for PRIVATE-alice" in result.messages[2].text  # the model reads it
    (span,) = telemetry.named("execute_tool")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["error.type"] == "ValueError"
    if capture:
        assert span.status.description == "ValueError: no record for PRIVATE-alice"
    else:
        assert span.status.description == "ValueError"
        assert "PRIVATE-alice" not in everything_recorded(telemetry)


async def test_a_raised_tool_error_ends_the_run_span_with_its_type_only(
    telemetry: Telemetry,
) -> None:
    call = ToolCall(id="call_1", name="lookup", arguments={"name": "PRIVATE-alice"})
    config = AgentLoopConfig(
        provider=ScriptedProvider([AssistantMessage(content=[call])]),
        hooks=[telemetry.hook],
        raise_tool_errors=True,
    )
    with pytest.raises(ValueError, match="PRIVATE-alice"):  # the application still gets it
        await agent_loop("find alice", AgentContext(tools=[lookup]), config)
    (run,) = telemetry.named("invoke_agent")
    assert run.status.description == "ValueError" and run.attributes["error.type"] == "tool"
    assert "PRIVATE-alice" not in everything_recorded(telemetry)


async def test_a_tool_error_without_an_exception_has_no_text_either(telemetry: Telemetry) -> None:
    @tool
    def find(name: str) -> ToolResult:
        """Find a customer."""
        return ToolResult.error(f"no record for {name}")

    call = ToolCall(id="call_1", name="find", arguments={"name": "PRIVATE-bob"})
    model = ScriptedProvider([AssistantMessage(content=[call]), "Not found."])
    await Agent(model, tools=[find], hooks=[telemetry.hook]).run("find bob")
    (span,) = telemetry.named("execute_tool")
    assert span.status.description == "tool_error" and span.attributes["error.type"] == "tool_error"
    assert "PRIVATE-bob" not in everything_recorded(telemetry)


async def test_an_mcp_servers_tool_is_an_extension(
    telemetry: Telemetry, server_preloader: Preloader
) -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[mcp]'")
    from treadle.mcp import MCPServerStdio

    # the MCP test server, forked from the worker's preloader of the MCP SDK (conftest.py)
    command, *args = server_preloader.command(MCP_SERVER, "stdio")
    server = MCPServerStdio("demo", command=command, args=args, errlog=subprocess.DEVNULL)
    calls = [ToolCall(id="m1", name="mcp__demo__add", arguments={"a": 2, "b": 3})]
    calls.append(ToolCall(id="f1", name="add", arguments={"a": 1, "b": 1}))
    model = ScriptedProvider([AssistantMessage(content=calls), "5 and 2."])
    async with server:
        await Agent(model, tools=[server, add], hooks=[telemetry.hook]).run("add")
    kinds = {s.attributes["gen_ai.tool.name"]: s.attributes["gen_ai.tool.type"]
             for s in telemetry.named("execute_tool")}  # fmt: skip
    assert kinds == {"mcp__demo__add": "extension", "add": "function"}


async def test_retries_are_visible_on_the_chat_span(telemetry: Telemetry) -> None:
    fake = WireFake.openai([Fail(429, retry_after=0.01), "ok"])
    config = AgentLoopConfig(
        provider=fake.provider("gpt-4o-mini", api_key="k"),
        hooks=[telemetry.hook],
        retry=RetryPolicy(initial_delay_s=0.01),
    )
    await agent_loop("hi", AgentContext(), config)
    (chat,) = telemetry.named("chat")
    (retry,) = [e for e in chat.events if e.name == "gen_ai.client.retry"]
    assert retry.attributes["error.type"] == "rate_limit"
    assert retry.attributes["treadle.retry.attempt"] == 1
    assert chat.status.status_code != StatusCode.ERROR


async def test_a_fallback_is_visible_on_the_chat_span(telemetry: Telemetry) -> None:
    from treadle.providers import FallbackModel, ProviderError

    busy = ScriptedProvider([ProviderError("overloaded", "busy", status_code=529)], model="a")
    model = FallbackModel(busy, ScriptedProvider(["ok"], model="b"))
    await agent_loop("hi", AgentContext(), AgentLoopConfig(provider=model, hooks=[telemetry.hook]))
    (chat,) = telemetry.named("chat")
    (moved,) = [e for e in chat.events if e.name == "treadle.fallback"]
    assert moved.attributes["treadle.fallback.from"] == "scripted:a"
    assert moved.attributes["treadle.fallback.to"] == "scripted:b"
    assert moved.attributes["error.type"] == "overloaded"
    assert chat.attributes["gen_ai.response.model"] == "b"


async def test_cancellation_ends_every_span_with_cancelled(telemetry: Telemetry) -> None:
    fake = WireFake.openai([Slow("word " * 200, delay=0.02)])
    token = CancellationToken()
    config = AgentLoopConfig(
        provider=fake.provider("gpt-4o-mini", api_key="k"), hooks=[telemetry.hook]
    )

    async def cancel_soon() -> None:
        await anyio.sleep(0.2)
        token.cancel("immediate")

    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_soon)
        await agent_loop("talk", AgentContext(), config, None, token)
    (chat,) = telemetry.named("chat")
    (run,) = telemetry.named("invoke_agent")
    assert chat.attributes["error.type"] == "cancelled"
    assert run.attributes["error.type"] == "cancelled"
    assert run.attributes["treadle.end_reason"] == "cancelled"


async def test_sub_agents_nest_under_the_parents_tool_span(telemetry: Telemetry) -> None:
    child = Agent(ScriptedProvider(["the child's answer"]), name="researcher")
    call = ToolCall(id="p1", name="researcher", arguments={"task": "look it up"})
    parent = Agent(
        ScriptedProvider([AssistantMessage(content=[call]), "done"]),
        tools=[child.as_tool()],
        hooks=[telemetry.hook],
    )
    await parent.run("go")
    runs = {s.name: s for s in telemetry.named("invoke_agent")}
    (tool_span,) = telemetry.named("execute_tool")
    assert set(runs) == {"invoke_agent treadle", "invoke_agent researcher"}
    nested = runs["invoke_agent researcher"]
    assert parent_of(nested) == tool_span.context.span_id
    assert parent_of(tool_span) == runs["invoke_agent treadle"].context.span_id
    child_chats = [c for c in telemetry.named("chat") if parent_of(c) == nested.context.span_id]
    assert len(child_chats) == 1
    assert tool_span.attributes["treadle.child_loop_id"] == nested.attributes["treadle.loop_id"]


async def test_content_is_recorded_only_when_asked() -> None:
    telemetry = Telemetry(capture_content=True)
    fake = WireFake.openai([tool_turn(), "It is 5."])
    agent = Agent(
        fake.provider("gpt-4o-mini", api_key="k"),
        tools=[add],
        hooks=[telemetry.hook],
        system_prompt="Be brief.",
    )
    await agent.run("2+3?")
    first = telemetry.named("chat")[0]
    assert '"content": "2+3?"' in first.attributes["gen_ai.input.messages"]
    assert "Be brief." in first.attributes["gen_ai.system_instructions"]
    assert '"name": "add"' in first.attributes["gen_ai.output.messages"]
    (call,) = telemetry.named("execute_tool")
    assert call.attributes["gen_ai.tool.call.result"] == "5"


async def test_metrics_follow_the_conventions(telemetry: Telemetry) -> None:
    fake = WireFake.openai(["hello"])
    agent = Agent(fake.provider("gpt-4o-mini", api_key="k"), hooks=[telemetry.hook])
    result = await agent.run("hi")
    tokens = telemetry.metric_points("gen_ai.client.token.usage")
    by_type = {p.attributes["gen_ai.token.type"]: p.sum for p in tokens}
    assert by_type == {"input": result.usage.input, "output": result.usage.output}
    (duration,) = telemetry.metric_points("gen_ai.client.operation.duration")
    assert duration.count == 1 and duration.attributes["gen_ai.operation.name"] == "chat"


def test_import_treadle_does_not_import_opentelemetry() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys, treadle; print('opentelemetry' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "False"

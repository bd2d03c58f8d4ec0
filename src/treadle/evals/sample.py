"""One sample: a case run once on one model — the conversation (each user turn a run of the
agent, every event kept), its time limit, then its evaluators."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import ConfigurationError, UsageError
from ..loop import Hooks, RunHandle
from ..providers import ModelRequest, Provider
from ..testing import ScriptedProvider
from ..types import (
    AgentEvent,
    AgentMessage,
    AssistantMessage,
    MessageUpdate,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .core import Case, EvalContext, Evaluator, Prompt, Score, failed_score
from .jsonish import as_json
from .recorded import with_recorded
from .results import SampleResult

if TYPE_CHECKING:
    from ..agent import Agent, RunResult

REQUEST_EVENT = "treadle.ui.model_request"
"""The custom event the web UI's inspector reads a model request from (its "Request
sent" view); a sample records each request of its runs so."""


class RequestRecorder(Hooks):
    """Each model request of a run (what the adapter is given, after the other hooks), as
    a custom event for the report's inspector."""

    async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
        await run.emit(REQUEST_EVENT, request.model_dump(mode="json", exclude={"coalesce_deltas"}))
        return request


@dataclass
class SampleSpec:
    """What one sample runs: a case, on a model (``provider``: None is the agent's own),
    for the ``repeat``-th time."""

    index: int
    case: Case
    model: str
    provider: Callable[[Case, int], Provider | None]
    repeat: int


def event_json(event: AgentEvent) -> dict[str, Any]:
    """An event as the inspector reads it: a ``message_update`` with its delta only."""
    if isinstance(event, MessageUpdate):
        return {
            "type": event.type,
            "seq": event.seq,
            "loop_id": event.loop_id,
            "depth": event.depth,
            "timestamp": event.timestamp,
            "delta": event.delta.model_dump(mode="json"),
        }
    data: dict[str, Any] = event.model_dump(mode="json")
    return data


def transcript(messages: Sequence[AgentMessage]) -> list[dict[str, Any]]:
    """A conversation in a few fields per message (the report's case view)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, UserMessage):
            out.append({"role": "user", "text": m.text})
        elif isinstance(m, AssistantMessage):
            entry: dict[str, Any] = {"role": "assistant", "text": m.text}
            if m.thinking:
                entry["thinking"] = m.thinking
            if m.tool_calls:
                entry["tool_calls"] = [
                    {"name": c.name, "arguments": as_json(c.arguments)} for c in m.tool_calls
                ]
            if m.error is not None:
                entry["error"] = f"{m.error.kind}: {m.error.message}"
            out.append(entry)
        elif isinstance(m, ToolResultMessage):
            out.append(
                {"role": "tool", "name": m.tool_name, "text": m.text, "is_error": m.is_error}
            )
    return out


def make_agent(target: Any, provider: Provider | None) -> Agent[Any]:
    """The agent a sample runs: a fork of an :class:`Agent` (a history of its own, kept in
    memory even when the agent has a store), on ``provider`` when given; or what a
    function of the provider returns."""
    from ..agent import Agent
    from ..sessions import MemoryStore

    if isinstance(target, Agent):
        agent: Agent[Any] = target.fork(store=MemoryStore() if target.store else None)
        if provider is not None:
            agent.provider = provider
        return agent
    if provider is None:
        raise ConfigurationError(
            "the target is a function of the model: give models=[...] (or --model), or give "
            "every case a script"
        )
    made = target(provider)
    if not isinstance(made, Agent):
        raise UsageError(
            f"the target function must return an Agent, got {type(made).__name__} "
            "(a function taking the model and returning Agent(model, tools=...))"
        )
    return made


async def _next_user_turn(case: Case, result: RunResult[Any] | None, sent: int) -> Prompt | None:
    turns = case.turns
    if sent < len(turns):
        return turns[sent]
    if case.user is None:
        return None
    got: Any = case.user(result, sent)
    if inspect.isawaitable(got):
        got = await got
    if got is not None and not isinstance(got, (str, UserMessage)):
        raise UsageError(
            f"case {case.name!r}: the scripted user returned {got!r}; return the next "
            "message (a string) or None to end the conversation"
        )
    prompt: Prompt | None = got
    return prompt


async def converse(
    agent: Agent[Any],
    case: Case,
    hooks: Sequence[Hooks],
    inputs: list[Prompt],
    results: list[RunResult[Any]],
    events: list[AgentEvent],
) -> None:
    """The case's conversation: each user turn a run of ``agent``, until the turns (and the
    scripted user) are done, a run does not complete, or ``max_user_turns``."""
    prompt = await _next_user_turn(case, None, 0)
    while prompt is not None:
        inputs.append(prompt)
        async with agent.stream(prompt, hooks=hooks) as stream:
            async for event in stream:
                events.append(event)
        result = stream.result
        results.append(result)
        if result.reason != "completed" or len(inputs) >= case.max_user_turns:
            return
        prompt = await _next_user_turn(case, result, len(inputs))


async def score_sample(evaluators: Sequence[Evaluator], ctx: EvalContext) -> list[Score]:
    scores = []
    for ev in evaluators:
        try:
            score = await ev.evaluate(ctx)
        except Exception as exc:
            score = failed_score(ev.label(), exc)
        if not isinstance(score, Score):
            score = failed_score(ev.label(), TypeError(f"evaluate returned {score!r}, not a Score"))
        scores.append(score)
    return scores


async def run_sample(
    spec: SampleSpec,
    target: Any,
    evaluators: Sequence[Evaluator],
    *,
    timeout_s: float | None,
    resolve_model: Callable[[str | Provider], Provider],
    hooks: Sequence[Hooks],
) -> tuple[SampleResult, EvalContext]:
    """Run ``spec``'s case once and score it."""
    case = spec.case
    inputs: list[Prompt] = []
    results: list[RunResult[Any]] = []
    events: list[AgentEvent] = []
    error: str | None = None
    timeout = case.timeout_s or timeout_s
    started = anyio.current_time()
    try:
        with anyio.fail_after(timeout) if timeout else nullcontext():
            if case.script:
                provider: Provider | None = ScriptedProvider(list(case.script))
            else:
                provider = spec.provider(case, spec.repeat)
            agent = make_agent(target, provider)
            if case.tools:
                agent.context.tools = with_recorded(agent.context.tools, case.tools, case.name)
            await agent.__aenter__()  # its toolsets (MCP servers ...) start
            try:
                await converse(agent, case, [RequestRecorder(), *hooks], inputs, results, events)
            finally:
                with anyio.CancelScope(shield=True):  # closed even past the time limit
                    await agent.aclose()
    except TimeoutError:
        error = f"timed out after {timeout:g} s"
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    duration = anyio.current_time() - started
    ctx = EvalContext(
        case=case,
        model=spec.model,
        repeat=spec.repeat,
        inputs=inputs,
        results=results,
        events=events,
        duration_s=duration,
        resolve_model=resolve_model,
        hooks=list(hooks),
    )
    scores = [] if error else await score_sample(evaluators, ctx)
    eval_usage = Usage()
    for score in scores:
        if score.usage is not None:
            eval_usage = eval_usage + score.usage
    passed = error is None and bool(scores) and all(s.passed for s in scores)
    result = SampleResult(
        case=case.name,
        model=spec.model,
        repeat=spec.repeat,
        passed=passed,
        score=sum(s.value for s in scores) / len(scores) if scores else 0.0,
        scores=scores,
        output=as_json(ctx.output),
        text=ctx.text,
        reason=ctx.result.reason if ctx.result is not None else None,
        error=error,
        usage=ctx.usage,
        eval_usage=eval_usage,
        turns=ctx.turns,
        tool_calls=[{"name": c.name, "arguments": as_json(c.arguments)} for c in ctx.tool_calls],
        duration_s=duration,
        transcript=transcript(ctx.messages),
        events=[event_json(e) for e in events],
    )
    return result, ctx

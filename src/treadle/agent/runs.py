"""One run of an Agent, from its prompt to its :class:`RunResult` (``Agent.run``,
``Agent.stream``, ``Agent.continue_``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from anyio.abc import ObjectSendStream

from ..cancellation import CancellationToken
from ..loop import Hooks, ModelSettings, agent_loop, agent_loop_continue
from ..loop.channel import EventChannel
from ..loop.settings import validated_settings
from ..types import AgentEvent, AgentMessage, ContinuationKind, TurnTrigger
from .planning import make_plan, screen_prompts
from .result import RunResult
from .tally import OutputTool, RunTally, prompts_of, run_result, take_child_usage


async def run_agent(
    agent: Any,
    prompt: Any,
    *,
    deps: Any,
    events: ObjectSendStream[AgentEvent] | None,
    settings: ModelSettings | None = None,
    hooks: Sequence[Hooks] = (),
) -> RunResult[Any]:
    """One run of ``agent`` (an :class:`~treadle.Agent`; not imported here, which imports
    this): the prompts with the steering waiting for them, planning, the loop, interrupts,
    and the session recorder around it all."""
    recorder = agent._recorder
    if recorder is not None and recorder.closed:
        from ..sessions import SessionError

        raise SessionError(f"this Agent closed its session {agent.session_id!r}")
    state = RunTally(agent.output_retries)
    agent._aborted = False
    token = agent._token = CancellationToken()
    prompts = prompts_of(prompt)
    prompts = [*agent._interrupts, *agent._steer_after, *agent._steer_next, *prompts]
    agent._interrupts.clear()
    agent._steer_after.clear()
    agent._steer_next.clear()
    agent.context.loop_id = str(uuid.uuid4())
    if events is not None:  # the loops of this run (an interrupt starts another) share it
        events = EventChannel.of(events)
    tools_before = agent.context.tools
    if agent.output_type is not None:
        agent.context.tools = [*tools_before, OutputTool(agent.output_type, state)]
    config = agent._config(state, deps, hooks)
    if settings:
        merged = {**config.model_settings, **validated_settings(settings)}
        config = config.model_copy(update={"model_settings": merged})
    branching = agent.context.continuation_kind == ContinuationKind.BRANCH
    if branching and prompts:
        config = config.model_copy(update={"first_turn_trigger": TurnTrigger.BRANCH})
    if recorder is not None:  # first, so a message is durable before others hear of it
        config = config.model_copy(update={"hooks": [recorder, *config.hooks]})
    new: list[AgentMessage] = []
    try:
        if recorder is not None:
            await recorder.sync()  # edits since the last run (continue_, restore ...)
        plan = False
        if agent.planning and prompts and not token.cancelled:
            # filtered first: a rejected prompt is never sent to the planner nor stored
            plan, config = await screen_prompts(config, prompts)
        if plan and recorder is not None:
            await recorder.write_ahead(prompts)  # durable before the planning call
        if plan and not token.cancelled:
            prompts = await make_plan(
                agent.provider,
                agent._token,
                agent.context.resolve_system_prompt(),
                agent.messages,
                prompts,
                state,
                config,
                agent.context,
            )
        if prompts:
            new += await agent_loop(prompts, agent.context, config, events, token)
        else:
            new += await agent_loop_continue(agent.context, config, events, token)
        while agent._interrupts and state.reason == "cancelled" and not agent._aborted:
            token = agent._token = CancellationToken()
            again, agent._interrupts[:] = list(agent._interrupts), []
            agent.context.loop_id = str(uuid.uuid4())
            new += await agent_loop(again, agent.context, config, events, token)
    finally:
        agent.context.tools = tools_before
        if branching:
            agent.context.continuation_kind = ContinuationKind.INITIAL
            agent.context.parent_loop_id = None
        if recorder is not None and not recorder.closed:
            try:
                await recorder.sync()
            except Exception as exc:  # the run's result says so; runs do not raise
                state.store_error = f"{type(exc).__name__}: {exc}"
    usage = state.usage + state.planning_usage + take_child_usage(agent.context)
    agent.usage = agent.usage + usage
    return run_result(
        new, usage, state, agent.context, expects_output=agent.output_type is not None
    )

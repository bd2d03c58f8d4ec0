"""Checked by ``mypy --strict`` in CI (``.ci/run``), never run: a hook as a framework writes
one — every method gets the run handle first, and its types hold."""

from __future__ import annotations

from typing import Any

from typing_extensions import assert_type

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    Allow,
    Ask,
    AssistantMessage,
    Deny,
    Hooks,
    ModelRequest,
    RunEnding,
    RunHandle,
    ToolCall,
    ToolResult,
    Usage,
)
from treadle.loop import ApprovalHandler, ToolDecision
from treadle.types import AgentEndReason, CustomEvent, TurnEnd


class Audit(Hooks):
    async def before_loop(self, run: RunHandle) -> bool:
        assert_type(run.loop_id, str | None)
        assert_type(run.session_id, str | None)
        assert_type(run.agent_id, str | None)
        assert_type(run.parent_loop_id, str | None)
        assert_type(run.depth, int)
        assert_type(run.context, AgentContext)
        assert_type(run.config, AgentLoopConfig)
        assert_type(run.usage, Usage)
        assert_type(run.turn_index, int)
        assert_type(run.parent, RunHandle | None)
        assert_type(run.deps, Any)
        assert_type(run.state_for(self), dict[str, Any])
        return True

    async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
        assert_type(ending.reason, AgentEndReason)
        assert_type(ending.usage, Usage)

    async def before_end(self, run: RunHandle, ending: RunEnding) -> None:
        event = await run.emit("audit.done", {"reason": ending.reason})
        assert_type(event, CustomEvent | None)

    async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
        return True

    async def after_turn(self, run: RunHandle, event: TurnEnd) -> None:
        pass

    async def on_message(self, run: RunHandle, message: Any) -> None:
        pass

    async def on_error(self, run: RunHandle, message: AssistantMessage) -> None:
        pass

    async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
        return request

    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> ToolDecision | None:
        return Ask("sure?") if call.name == "rm" else None

    async def after_tool_call(
        self, run: RunHandle, call: ToolCall, result: ToolResult
    ) -> ToolResult | None:
        return None

    async def before_compaction(self, run: RunHandle, estimate: int) -> bool:
        return True

    async def after_compaction(self, run: RunHandle, stats: dict[str, Any]) -> None:
        pass

    def on_event(self, run: RunHandle, event: AgentEvent) -> None:
        pass


async def approve(run: RunHandle, call: ToolCall, ask: Ask) -> bool | Allow | Deny:
    return run.session_id is not None


handler: ApprovalHandler = approve

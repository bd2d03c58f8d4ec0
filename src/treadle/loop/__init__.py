"""The agent loop: agent_loop, agent_loop_continue, run_loop and their configuration."""

from ..cancellation import CancellationToken, CancelMode
from ..types import ContinuationKind, TurnTrigger
from ._context_guard import compact_context
from .channel import EventChannel
from .config import (
    AgentLoopConfig,
    ApprovalHandler,
    ExecutionLimits,
    FilterResult,
    Hooks,
    InputFilter,
    Pass,
    Reject,
    RetryPolicy,
    RunEnding,
    RunHandle,
    ToolExecution,
    Warn,
)
from .context import AgentContext
from .decisions import Allow, Ask, Deny, Suspension, ToolDecision
from .run import LoopResult, agent_loop, agent_loop_continue, run_loop
from .settings import ModelSettings
from .sidecall import call_model, side_request
from .sink import emit_custom_event, iter_events

__all__ = [
    "AgentContext",
    "AgentLoopConfig",
    "Allow",
    "ApprovalHandler",
    "Ask",
    "CancelMode",
    "CancellationToken",
    "ContinuationKind",
    "Deny",
    "EventChannel",
    "ExecutionLimits",
    "FilterResult",
    "Hooks",
    "InputFilter",
    "LoopResult",
    "ModelSettings",
    "Pass",
    "Reject",
    "RetryPolicy",
    "RunEnding",
    "RunHandle",
    "Suspension",
    "ToolDecision",
    "ToolExecution",
    "TurnTrigger",
    "Warn",
    "agent_loop",
    "agent_loop_continue",
    "call_model",
    "compact_context",
    "emit_custom_event",
    "iter_events",
    "run_loop",
    "side_request",
]

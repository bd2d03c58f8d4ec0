"""The agent loop: agent_loop, agent_loop_continue, run_loop and their configuration."""

from .._cancel import CancellationToken, CancelMode
from ..types import ContinuationKind, TurnTrigger
from .compaction import compact_context
from .config import (
    AgentLoopConfig,
    Allow,
    ApprovalHandler,
    Ask,
    Deny,
    ExecutionLimits,
    FilterResult,
    Hooks,
    InputFilter,
    ModelSettings,
    Pass,
    Reject,
    RetryPolicy,
    ToolDecision,
    ToolExecution,
    Warn,
)
from .context import AgentContext
from .run import LoopResult, agent_loop, agent_loop_continue, run_loop
from .sink import iter_events

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
    "ExecutionLimits",
    "FilterResult",
    "Hooks",
    "InputFilter",
    "LoopResult",
    "ModelSettings",
    "Pass",
    "Reject",
    "RetryPolicy",
    "ToolDecision",
    "ToolExecution",
    "TurnTrigger",
    "Warn",
    "agent_loop",
    "agent_loop_continue",
    "compact_context",
    "iter_events",
    "run_loop",
]

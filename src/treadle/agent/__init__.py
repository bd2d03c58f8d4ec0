"""The Agent facade: stateful runs, streaming, steering, structured output, sub-agents."""

from .agent import Agent, AgentSnapshot, SteerMode
from .result import AgentBusy, RunFailed, RunResult
from .stream import AgentStream
from .subagent import SubAgentTool

__all__ = [
    "Agent",
    "AgentBusy",
    "AgentSnapshot",
    "AgentStream",
    "RunFailed",
    "RunResult",
    "SteerMode",
    "SubAgentTool",
]

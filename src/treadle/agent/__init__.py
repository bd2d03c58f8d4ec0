"""The Agent facade: stateful runs, streaming, steering, structured output, sub-agents."""

from .agent import Agent, SteerMode
from .profile import Profile
from .result import AgentBusy, AgentSnapshot, RunFailed, RunResult
from .stream import AgentStream
from .subagent import SubAgentTool

__all__ = [
    "Agent",
    "AgentBusy",
    "AgentSnapshot",
    "AgentStream",
    "Profile",
    "RunFailed",
    "RunResult",
    "SteerMode",
    "SubAgentTool",
]

"""The Agent facade: stateful runs, streaming, steering, structured output, sub-agents."""

from .agent import Agent, SteerMode
from .profile import Profile
from .result import AgentBusy, AgentSnapshot, RunFailed, RunResult
from .settings import AgentOptions
from .stream import AgentStream
from .subagent import TASK_PARAMETERS, SubAgentTool, stopped_early_result

__all__ = [
    "TASK_PARAMETERS",
    "Agent",
    "AgentBusy",
    "AgentOptions",
    "AgentSnapshot",
    "AgentStream",
    "Profile",
    "RunFailed",
    "RunResult",
    "SteerMode",
    "SubAgentTool",
    "stopped_early_result",
]

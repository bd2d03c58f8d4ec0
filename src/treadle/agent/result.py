"""What a run of an Agent returns."""

from __future__ import annotations

from typing import Any, Generic

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypeVar

from ..errors import TreadleError
from ..types import AgentEndReason, AgentMessage, AssistantMessage, ErrorInfo, Usage

OutputT = TypeVar("OutputT")
AgentOutputT = TypeVar("AgentOutputT", default=None)
"""An Agent's output type: its ``output_type``; ``None`` for a text-only agent (the default,
so ``Agent("openai:gpt-4o-mini")`` needs no annotation). ``RunResult`` keeps a plain type
variable: pydantic would otherwise validate an unparametrised result against the default."""


class RunResult(BaseModel, Generic[OutputT]):
    """The outcome of one run: final text, new messages, usage, why it ended, and the
    structured ``output`` when the agent has an ``output_type``.

    ``usage`` is the run's total. ``usage_by_model`` splits the run's model answers by the
    model that gave them (``AssistantMessage.model``), each :class:`~treadle.Usage` with its
    ``cost_usd`` where the model catalog knows the price — for a run routed between models
    (``treadle.ext.routing``) or falling back from one to another. Calls made for
    compaction, planning and sub-agents count in ``usage`` only."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    messages: list[AgentMessage] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    usage_by_model: dict[str, Usage] = Field(default_factory=dict)
    reason: AgentEndReason = "completed"
    error: ErrorInfo | None = None
    output: OutputT | None = None
    pending_tool_calls: list[str] = Field(default_factory=list)

    @property
    def text(self) -> str:
        """The text of the last assistant message of the run ("" when there is none)."""
        for message in reversed(self.messages):
            if isinstance(message, AssistantMessage) and message.text:
                return message.text
        return ""

    @property
    def cost_usd(self) -> float | None:
        return self.usage.cost_usd

    @property
    def ok(self) -> bool:
        return self.reason == "completed"

    def __str__(self) -> str:
        return self.text

    # a notebook or IPython shows the answer, the tool calls, usage and the end (display.py)
    def _repr_html_(self) -> str:
        from .display import as_html

        return as_html(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        from .display import as_text

        printer.text("RunResult(...)" if cycle else as_text(self))

    def raise_for_error(self) -> RunResult[OutputT]:
        """Raise :class:`RunFailed` unless the run completed."""
        if self.reason != "completed":
            raise RunFailed(self)
        return self


class RunFailed(TreadleError):
    """A run did not complete; ``result`` holds everything it produced."""

    def __init__(self, result: RunResult[Any]) -> None:
        detail = f": {result.error.kind}: {result.error.message}" if result.error else ""
        super().__init__(f"the run ended with reason {result.reason!r}{detail}")
        self.result = result


class AgentBusy(TreadleError, RuntimeError):
    """A second run was started while one is in progress on the same Agent."""


class AgentSnapshot(BaseModel):
    """An Agent's conversation state, for ``restore`` (JSON round-trips)."""

    model_config = ConfigDict(extra="forbid")

    messages: list[AgentMessage] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    agent_id: str | None = None
    session_id: str | None = None

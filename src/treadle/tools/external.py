"""``ExternalTool``: a tool the model may call but something outside the process answers.

A browser (a front-end tool), another service or a person runs it. The loop never runs it:
a call to it leaves the run ``suspended`` with the call in ``pending_tool_calls``, and the
run carries on (``agent_loop_continue`` / ``Agent.continue_()`` / ``Agent.stream([])``) once
a :class:`~treadle.types.ToolResultMessage` for the call has joined the history.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigurationError, StateError
from .base import ToolCategory, ToolContext
from .traits import ToolTraits, as_category


class ExternalTool:
    """A tool answered outside the loop (``ToolTraits(external=True)``): offered to the
    model like any other, never run here."""

    def __init__(
        self,
        name: str,
        description: str = "",
        parameters: dict[str, Any] | None = None,
        *,
        category: ToolCategory | str = ToolCategory.EXEC,
    ) -> None:
        if not name:
            raise ConfigurationError("an ExternalTool needs a name")
        self.name = name
        self.description = description
        self.parameters: dict[str, Any] = parameters or {"type": "object", "properties": {}}
        self.traits = ToolTraits(category=as_category(category), external=True)

    @classmethod
    def from_function(cls, fn: Callable[..., Any], *, name: str | None = None) -> ExternalTool:
        """The name, description and argument schema of ``fn`` (as ``@tool`` reads them); its
        body is never called."""
        from .function_tool import FunctionTool

        spec = FunctionTool(fn, name=name)
        return cls(spec.name, spec.description, spec.parameters, category=spec.traits.category)

    def __repr__(self) -> str:
        return f"ExternalTool({self.name!r})"

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> Any:
        raise StateError(
            f"tool {self.name!r} is external: the loop leaves its calls pending for the "
            "application to answer (append a ToolResultMessage, then continue the run)"
        )

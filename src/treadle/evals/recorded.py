"""A case's recorded tool answers: the agent's tool calls answered from the case, so a
sample never reaches the real service (a search API, a database) and answers the same way
on every run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from ..tools import Tool, ToolContext, Toolset, as_tool, to_tool_result
from ..types import TextContent, ToolResult
from .jsonish import as_json

_KEYS = {"answer", "arguments", "error"}


@dataclass(frozen=True)
class ToolAnswer:
    """One recorded answer of a tool: ``answer`` (what the tool returns: text or any JSON
    value) or ``error`` (the text of a failed call), for calls with these ``arguments``
    (given ones must match; None: any call)."""

    answer: Any = None
    arguments: Mapping[str, Any] | None = None
    error: str | None = None

    def matches(self, arguments: Mapping[str, Any]) -> bool:
        if self.arguments is None:
            return True
        got = as_json(dict(arguments))
        return all(k in got and got[k] == v for k, v in as_json(dict(self.arguments)).items())


def tool_answers(value: Any) -> list[ToolAnswer]:
    """One tool's recorded answers from a case: a :class:`ToolAnswer`, a list of them (or
    of ``{"answer" | "error", "arguments"}`` mappings, or of plain answers), or one plain
    answer for every call."""
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, ToolAnswer):
            out.append(item)
        elif isinstance(item, Mapping) and set(item) <= _KEYS and set(item) & {"answer", "error"}:
            out.append(ToolAnswer(item.get("answer"), item.get("arguments"), item.get("error")))
        else:
            out.append(ToolAnswer(item))
    if not out:
        raise ConfigurationError("a tool's recorded answers must hold at least one answer")
    return out


class Player:
    """Plays one sample's recorded answers: a call takes the first answer not yet played
    whose arguments match; once each matching one has played, the last of them answers
    again."""

    def __init__(self, answers: Mapping[str, list[ToolAnswer]]) -> None:
        self.answers = answers
        self.played: set[tuple[str, int]] = set()

    def answer(self, name: str, arguments: Mapping[str, Any]) -> ToolAnswer | None:
        candidates = [i for i, a in enumerate(self.answers[name]) if a.matches(arguments)]
        if not candidates:
            return None
        fresh = [i for i in candidates if (name, i) not in self.played]
        chosen = fresh[0] if fresh else candidates[-1]
        self.played.add((name, chosen))
        return self.answers[name][chosen]


class RecordedTool:
    """A tool whose calls are answered from the case, with the real tool's name,
    description, schema and traits (so the model sees the same tool)."""

    def __init__(self, tool: Tool, player: Player) -> None:
        self.name = tool.name
        self.description = tool.description
        self.parameters = tool.parameters
        traits = getattr(tool, "traits", None)
        if traits is not None:
            self.traits = traits
        self.player = player

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> Any:
        found = self.player.answer(self.name, arguments)
        if found is None:
            return ToolResult(
                content=[
                    TextContent(
                        text=f"no recorded answer of {self.name} for the arguments "
                        f"{as_json(arguments)}: the case records answers for other arguments"
                    )
                ],
                is_error=True,
                details={"recorded": True},
            )
        if found.error is not None:
            return ToolResult(
                content=[TextContent(text=found.error)],
                is_error=True,
                details={"recorded": True},
            )
        result = to_tool_result(found.answer)
        return result.model_copy(update={"details": {"recorded": True}})


class RecordedToolset:
    """A toolset whose tools named in the case are answered from it."""

    def __init__(self, toolset: Toolset, player: Player) -> None:
        self.toolset = toolset
        self.player = player

    async def get_tools(self) -> Sequence[Tool]:
        tools = await self.toolset.get_tools()
        return [RecordedTool(t, self.player) if t.name in self.player.answers else t for t in tools]


def with_recorded(tools: Sequence[Any], answers: Mapping[str, Any], case: str) -> list[Any]:
    """``tools`` (an agent's tools and toolsets) with the ones ``answers`` names answered
    from it. A name no tool has is an error, unless a toolset may offer it later."""
    player = Player({name: tool_answers(value) for name, value in answers.items()})
    out: list[Any] = []
    names: set[str] = set()
    toolsets = False
    for item in tools:
        if isinstance(item, Toolset) and not isinstance(item, Tool):
            toolsets = True
            out.append(RecordedToolset(item, player))
            continue
        tool = as_tool(item)
        names.add(tool.name)
        out.append(RecordedTool(tool, player) if tool.name in player.answers else item)
    unknown = sorted(set(player.answers) - names)
    if unknown and not toolsets:
        raise ConfigurationError(
            f"case {case!r} records answers for {unknown}, which the agent has no tool "
            f"named (its tools: {sorted(names)})"
        )
    return out

"""A run's tools by name: toolsets expanded, each tool's traits read once, the specs a
request carries. Rebuilt at the start of a turn only when the tools changed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from .._signals import HookFailed
from ..errors import ConfigurationError
from ..tools import Tool, Toolset, ToolTraits, as_tool, tool_spec, traits_of
from ..tools.traits import DEFAULT_TRAITS
from ..types import ToolSpec

_TOOLSET_TYPES: dict[type, bool] = {}
_TOOLSET_TYPES_KEPT = 256


def _is_toolset(cls: type) -> bool:
    """Whether objects of ``cls`` may be toolsets (a ``get_tools`` method); cached, since a
    protocol ``isinstance`` check costs microseconds and runs for every tool every turn. The
    cache is bounded (emptied when full): classes made on the fly, one per run, cannot grow
    it without end."""
    found = _TOOLSET_TYPES.get(cls)
    if found is None:
        if len(_TOOLSET_TYPES) >= _TOOLSET_TYPES_KEPT:
            _TOOLSET_TYPES.clear()
        found = _TOOLSET_TYPES[cls] = callable(getattr(cls, "get_tools", None))
    return found


class ToolTable:
    """The tools of one run by name, with their traits and specs."""

    __slots__ = ("_key", "_tools", "_traits", "specs")

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._traits: dict[str, ToolTraits] = {}  # each tool's, read when the tools resolve
        self.specs: list[ToolSpec] = []
        self._key: tuple[int, ...] = ()

    @property
    def key(self) -> tuple[int, ...]:
        """Identifies the tools (changes whenever they do): a cache key for their specs."""
        return self._key

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def names(self) -> list[str]:
        return list(self._tools)

    def traits(self, name: str) -> ToolTraits:
        """The traits of the tool ``name`` (the defaults for a tool the run does not have)."""
        return self._traits.get(name, DEFAULT_TRAITS)

    def known_traits(self, name: str) -> ToolTraits | None:
        return self._traits.get(name)

    def all_traits(self) -> Iterable[ToolTraits]:
        return self._traits.values()

    async def refresh(self, items: Iterable[Any], call_hook: Callable[..., Awaitable[Any]]) -> None:
        """Resolve ``items`` (``AgentContext.tools``: tools, functions, toolsets), asking
        each toolset for its tools through ``call_hook``; nothing is rebuilt when the same
        tools come back."""
        found: list[Any] = []
        for item in items:
            if _is_toolset(type(item)) and isinstance(item, Toolset) and not isinstance(item, Tool):
                found.extend(await call_hook(item.get_tools))
            else:
                found.append(item)
        key = tuple(id(t) for t in found)
        if key == self._key:
            return
        tools: dict[str, Tool] = {}
        traits: dict[str, ToolTraits] = {}
        try:
            for item in found:
                tool = as_tool(item)
                if tool.name in tools:
                    first = traits[tool.name].source or "a tool"
                    second = traits_of(tool).source or "a tool"
                    raise ConfigurationError(
                        f"two tools are named {tool.name!r} ({first} and {second}); names "
                        "must be unique: rename one, or give an MCP server another prefix"
                    )
                tools[tool.name] = tool
                traits[tool.name] = traits_of(tool)  # read once per tool, here
        except (TypeError, ValueError) as exc:
            raise HookFailed("AgentContext.tools", exc) from None
        self._tools, self._traits = tools, traits
        self.specs = [tool_spec(t) for t in tools.values()]
        self._key = key

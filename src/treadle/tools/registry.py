"""ToolRegistry: tools by exact name."""

from __future__ import annotations

import copy
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from ..errors import ConfigurationError, UsageError
from ..types import ToolSpec
from .base import Tool, Toolset
from .function_tool import FunctionTool
from .traits import traits_of


def as_tool(obj: Tool | Callable[..., Any]) -> Tool:
    """A :class:`Tool` as it is, or a plain function wrapped with ``@tool``."""
    if type(obj) is FunctionTool:  # the common case, without a protocol check (microseconds)
        return obj
    if isinstance(obj, Tool):
        return obj
    if callable(obj):
        return FunctionTool(obj)
    raise UsageError(
        f"{obj!r} is not a tool: pass a function, a @tool-decorated function, or an object "
        "with name, description, parameters and an async run(arguments, ctx) method"
    )


def is_toolset(obj: Any) -> bool:
    """Whether ``obj`` goes in a tools list as a toolset (``get_tools``), not as a tool."""
    return type(obj) is not FunctionTool and isinstance(obj, Toolset) and not isinstance(obj, Tool)


_SPECS: weakref.WeakKeyDictionary[Any, tuple[str, str, Any, ToolSpec]] = weakref.WeakKeyDictionary()


def tool_spec(t: Tool) -> ToolSpec:
    """What a model request says about ``t``. The same :class:`ToolSpec` object comes back
    while the tool's name, description and parameters are equal to what they were (a copy of
    the parameters is kept, so an edit in place is seen), so adapters can keep what they
    derive from it across runs."""
    name, description, parameters = t.name, t.description, t.parameters
    cached = getattr(t, "cache_point", False) is True  # optional: an explicit cache point
    try:
        found = _SPECS.get(t)
    except TypeError:  # not hashable or not weak-referenceable: nothing kept
        found = None
    if found is not None and (found[0], found[1], found[2]) == (name, description, parameters):
        if found[3].cache_point is cached:
            return found[3]
    spec = ToolSpec(name=name, description=description, parameters=parameters)
    if cached:  # set only when asked: the spec's JSON stays as it was for every other tool
        spec = spec.model_copy(update={"cache_point": True})
    try:
        _SPECS[t] = (name, description, copy.deepcopy(parameters), spec)
    except TypeError:
        pass
    return spec


class ToolRegistry:
    """An ordered set of tools with unique names."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, t: Tool | Callable[..., Any]) -> Tool:
        item = as_tool(t)
        traits_of(item)  # traits declared the old way are refused when the tool is added
        if item.name in self._tools:
            raise ConfigurationError(
                f"two tools are named {item.name!r}; tool names must be unique"
            )
        self._tools[item.name] = item
        return item

    def remove(self, name: str) -> None:
        del self._tools[name]

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [tool_spec(t) for t in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolRegistry({self.names!r})"


@asynccontextmanager
async def open_toolsets(items: Iterable[Any]) -> AsyncIterator[None]:
    """Start the toolsets among ``items`` that need starting (those that are async context
    managers, such as MCP servers) and stop them when the block ends, in reverse order —
    ``async with open_toolsets(context.tools): ...`` around the runs that use them.
    ``async with agent:`` does this for an Agent's tools."""
    async with AsyncExitStack() as stack:
        for item in items:
            if isinstance(item, Toolset) and hasattr(item, "__aenter__"):
                await stack.enter_async_context(item)  # type: ignore[arg-type]
        yield

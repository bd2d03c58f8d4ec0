"""Profiles an agent switches between mid-run: each a system prompt and tools (plus
planning and a turn cap for runs that start under it), under one persona.

The system prompt is built fresh for every model call and never stored in the history, and
the tools are a toolset the loop re-reads every turn, so a switch (the ``switch_profile``
tool, or :meth:`Profiles.switch`) takes effect at the next model call.

::

    profiles = Profiles([Profile("chat", "Chat briefly."), Profile("coder", "Write code.",
                         tools=[run_tests])], persona="You are Navi.")
    agent = profiles.agent(model)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..agent import Agent, Profile
from ..errors import ConfigurationError, UnknownName
from ..loop import ExecutionLimits
from ..tools import FunctionTool, Tool, Toolset

__all__ = ["PERSONA_SEPARATOR", "Profile", "Profiles"]

PERSONA_SEPARATOR = "\n\n---\n\n"


class Profiles:
    """Named :class:`~treadle.agent.Profile` objects and the one in use (``active``; the
    first unless ``active=`` names one).

    ``system_prompt`` (pass the method itself: ``Agent(system_prompt=profiles.system_prompt)``)
    is ``persona``, then :data:`PERSONA_SEPARATOR`, then the active profile's prompt.
    ``toolset`` (``Agent(tools=[profiles.toolset])``) offers the active profile's tools and
    the switch tool. ``switches`` records each switch as ``(from, to)``. :meth:`agent` builds
    an Agent wired to both, with the active profile's planning and turn cap.
    """

    def __init__(
        self,
        profiles: Sequence[Profile],
        *,
        active: str | None = None,
        persona: str | None = None,
        switch_name: str = "switch_profile",
    ) -> None:
        if not profiles:
            raise ConfigurationError("Profiles needs at least one profile")
        self.profiles = {p.name: p for p in profiles}
        if len(self.profiles) != len(profiles):
            raise ConfigurationError("profile names must be unique")
        self.active = self.profiles[active] if active is not None else profiles[0]
        self.persona = persona
        self.switches: list[tuple[str, str]] = []
        self.switch_name = switch_name
        self.toolset = _ActiveTools(self)
        self._switch_tool = self._make_switch_tool()

    def switch(self, name: str) -> Profile:
        """Make ``name`` the active profile (``KeyError`` naming the choices if unknown)."""
        profile = self.profiles.get(name)
        if profile is None:
            raise UnknownName(f"no profile {name!r}; choose one of: {', '.join(self.profiles)}")
        if profile is not self.active:
            self.switches.append((self.active.name, name))
            self.active = profile
        return profile

    def system_prompt(self) -> str:
        """The persona and the active profile's prompt, built now."""
        prompt = self.active.system_prompt
        text = prompt() if callable(prompt) else prompt
        parts = [p for p in (self.persona, text) if p]
        return PERSONA_SEPARATOR.join(parts)

    def agent(self, model: Any, **kwargs: Any) -> Agent[Any]:
        """An :class:`~treadle.Agent` on these profiles: its system prompt and tools follow
        the active profile (``tools=`` given here are offered under every profile), and
        its planning and ``max_turns`` are the active profile's when it is built."""
        tools = [*kwargs.pop("tools", ()), self.toolset]
        active = self.active
        if active.planning is not None:
            kwargs.setdefault("planning", active.planning)
        if active.max_turns is not None and "limits" not in kwargs:
            kwargs["limits"] = ExecutionLimits(max_turns=active.max_turns)
        return Agent(model, system_prompt=self.system_prompt, tools=tools, **kwargs)

    def _make_switch_tool(self) -> FunctionTool:
        profiles = self

        def switch_profile(name: str) -> str:
            """Switch to another profile: a different role, instructions and tools, from
            your next step on.

            Args:
                name: the profile to switch to
            """
            profile = profiles.switch(name)
            return f"Switched to the {profile.name} profile."

        choices = "; ".join(
            f"{p.name}: {p.description}" if p.description else p.name
            for p in self.profiles.values()
        )
        description = (
            "Switch to another profile (a different role, instructions and tools) from your "
            f"next step on. Profiles: {choices}."
        )
        return FunctionTool(
            switch_profile, name=self.switch_name, description=description, category="info"
        )


class _ActiveTools:
    """A toolset: the active profile's tools (toolsets among them expanded) and the switch
    tool, re-read by the loop before every turn."""

    def __init__(self, profiles: Profiles) -> None:
        self._profiles = profiles

    async def get_tools(self) -> list[Any]:
        found: list[Any] = []
        for item in self._profiles.active.tools or ():
            if isinstance(item, Toolset) and not isinstance(item, Tool):
                found.extend(await item.get_tools())
            else:
                found.append(item)
        if len(self._profiles.profiles) > 1:
            found.append(self._profiles._switch_tool)
        return found

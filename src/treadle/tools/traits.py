"""``ToolTraits``: how the loop treats a tool, declared once as one frozen object.

A tool says how it wants to be run (its timeout, whether it may run alongside others, start
early, be retried, wait for a person's approval ...) with a ``traits`` attribute holding a
:class:`ToolTraits`; a tool without one gets the defaults. The loop reads it once per tool
when a run's tools are resolved (``traits_of``), and a wrapper forwards the object whole.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from .base import ToolCategory

#: The attribute names tools used to declare one by one, before ``traits``.
LOOSE_TRAITS = (
    "category",
    "timeout",
    "sequential",
    "eager",
    "idempotent",
    "retries",
    "external",
    "requires_approval",
    "accepts_raw_arguments",
    "validates_arguments",
    "source",
)


def as_category(value: ToolCategory | str) -> ToolCategory:
    """``value`` as a :class:`ToolCategory` (its plain value works too: ``"info"``)."""
    try:
        return ToolCategory(value)
    except ValueError:
        choices = ", ".join(repr(c.value) for c in ToolCategory)
        raise ConfigurationError(f"tool category {value!r} is not one of {choices}") from None


@dataclass(frozen=True, slots=True)
class ToolTraits:
    """How the loop treats a tool. Every field has a default, so give only what differs:
    ``traits = ToolTraits(category="info", idempotent=True)``. Values are checked here, when
    the tool is defined: a bad one raises :class:`~treadle.ConfigurationError`.

    Attributes:
        category: what kind of work the tool does (:class:`ToolCategory` or its value);
            sets its default timeout. Default ``exec`` (600 s).
        timeout: seconds a call may take before it is stopped with an error result. None
            (the default): ``AgentLoopConfig.tool_timeout``, else the category's default.
            It must be a positive number: 0 is refused (pass None for the default).
        sequential: True: never runs alongside other calls (under the parallel strategy
            it waits for the calls before it, runs alone, then the rest go on).
        eager: True: the loop may start a call as soon as its block of the assistant
            message is complete, while the model still streams (parallel strategy only).
            An eager tool is idempotent (a discarded answer's calls may run again), so
            ``eager=True`` sets ``idempotent=True``; it cannot be ``sequential``.
        idempotent: True: running it twice is safe (it only reads, or the same effect
            again), so it may be retried and re-run where a call's outcome is unknown.
        retries: attempts after a raised exception (0.1 s apart, doubling); needs
            ``idempotent``. Default 0.
        external: True: never run in the loop; a call leaves the run ``suspended`` until its
            :class:`~treadle.types.ToolResultMessage` joins the history
            (:class:`~treadle.tools.ExternalTool`).
        requires_approval: True: each call waits for a person's decision (an
            :class:`~treadle.loop.Ask`: the ``approval_handler``, else the run suspends)
            unless a ``before_tool_call`` hook allows or denies it first.
        accepts_raw_arguments: True: called even when the model's argument text is not
            JSON (read ``ctx.tool_call.raw_arguments``).
        validates_arguments: True: the tool checks its own arguments, so the loop skips its
            check of required and unknown properties (``@tool`` functions validate fully
            with pydantic and set it).
        source: where the tool came from (``"MCP server 'files'"``), named when two tools
            have one name.
    """

    category: ToolCategory = ToolCategory.EXEC
    timeout: float | None = None
    sequential: bool = False
    eager: bool = False
    idempotent: bool = False
    retries: int = 0
    external: bool = False
    requires_approval: bool = False
    accepts_raw_arguments: bool = False
    validates_arguments: bool = False
    source: str | None = None

    def __post_init__(self) -> None:
        # a frozen dataclass setting its own fields: values normalised once, here
        object.__setattr__(self, "category", as_category(self.category))
        timeout = self.timeout
        if timeout is not None:
            if (
                isinstance(timeout, bool)
                or not isinstance(timeout, (int, float))
                or not math.isfinite(timeout)
                or timeout <= 0
            ):
                raise ConfigurationError(
                    f"tool timeout={timeout!r} is not allowed: pass None for the default "
                    "(AgentLoopConfig.tool_timeout, else the category's) or a positive "
                    "number of seconds"
                )
            object.__setattr__(self, "timeout", float(timeout))
        if self.eager:
            if self.sequential:
                raise ConfigurationError(
                    "a tool cannot be both eager and sequential: an eager call starts while "
                    "the model streams, alongside others; choose one"
                )
            object.__setattr__(self, "idempotent", True)
        retries = self.retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigurationError(f"tool retries={retries!r}: give a count of 0 or more")
        if retries and not self.idempotent:
            raise ConfigurationError(
                f"tool retries={retries} needs idempotent=True (a call that may have had "
                "effects is never run again)"
            )

    def timeout_for(self, config_timeout: float | None) -> float:
        """The seconds a call may take: this tool's ``timeout``, else the config's
        ``tool_timeout``, else the category's default."""
        if self.timeout is not None:
            return self.timeout
        if config_timeout is not None:
            return config_timeout
        return self.category.default_timeout


DEFAULT_TRAITS = ToolTraits()


def traits_of(tool: Any) -> ToolTraits:
    """A tool's :class:`ToolTraits`: its ``traits`` attribute, or the defaults when it has
    none. A tool that declares traits the old way, as loose attributes (``sequential =
    True``) and has no ``traits``, is refused with a :class:`~treadle.ConfigurationError`
    naming them, so none is silently ignored."""
    found = getattr(tool, "traits", None)
    if isinstance(found, ToolTraits):
        return found
    name = getattr(tool, "name", type(tool).__name__)
    if found is not None:
        raise ConfigurationError(
            f"tool {name!r}: traits is a {type(found).__name__}; give a ToolTraits "
            "(from treadle.tools import ToolTraits)"
        )
    loose = [attr for attr in LOOSE_TRAITS if hasattr(tool, attr)]
    if loose:
        shown = ", ".join(f"{attr}={getattr(tool, attr)!r}" for attr in loose)
        raise ConfigurationError(
            f"tool {name!r} ({type(tool).__name__}) declares {shown} as loose attributes, "
            f"which the loop does not read: declare `traits = ToolTraits({shown})` instead "
            "(from treadle.tools import ToolTraits), or rename them if they mean something "
            "else"
        )
    return DEFAULT_TRAITS

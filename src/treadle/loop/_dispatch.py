"""Which hooks of a config implement which :class:`Hooks` method: found once per config and
served to every place in the loop that calls hooks, so they all agree on what a hook is.

A hook implements a method when its class overrides it or the method was set on the
instance (``hook.on_event = fn``): both count the same for every method. The methods a
hook does not implement are never called, so an installed hook costs only what it has.
The dispatch is read when the config first runs, and again when ``config.hooks`` holds
other objects (``model_copy(update={"hooks": ...})``, a list changed in place).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from operator import is_
from typing import Any

from ..errors import ConfigurationError
from .config import AgentLoopConfig, Hooks

HookFn = Callable[..., Any]

SIGNATURES: dict[str, tuple[str, ...]] = {
    "before_loop": ("run",),
    "after_loop": ("run", "ending"),
    "before_end": ("run", "ending"),
    "before_turn": ("run", "turn_index"),
    "after_turn": ("run", "event"),
    "on_message": ("run", "message"),
    "on_error": ("run", "message"),
    "before_model_request": ("run", "request"),
    "before_tool_call": ("run", "call"),
    "after_tool_call": ("run", "call", "result"),
    "before_compaction": ("run", "estimate"),
    "after_compaction": ("run", "stats"),
    "on_event": ("run", "event"),
}
"""Every hook method and the arguments it is called with (after ``self``)."""


class HookDispatch:
    """Per hook method, the implementations of a config's hooks, in the config's order
    (bound methods, or the functions set on the instances)."""

    __slots__ = ("hooks", *SIGNATURES)

    hooks: tuple[Any, ...]
    before_loop: tuple[HookFn, ...]
    after_loop: tuple[HookFn, ...]
    before_end: tuple[HookFn, ...]
    before_turn: tuple[HookFn, ...]
    after_turn: tuple[HookFn, ...]
    on_message: tuple[HookFn, ...]
    on_error: tuple[HookFn, ...]
    before_model_request: tuple[HookFn, ...]
    before_tool_call: tuple[HookFn, ...]
    after_tool_call: tuple[HookFn, ...]
    before_compaction: tuple[HookFn, ...]
    after_compaction: tuple[HookFn, ...]
    on_event: tuple[HookFn, ...]

    def __init__(self, hooks: Sequence[Any]) -> None:
        self.hooks = tuple(hooks)
        for name, arguments in SIGNATURES.items():
            found: list[HookFn] = []
            for hook in self.hooks:
                fn = _implementation(hook, name)
                if fn is not None:
                    _check_arguments(hook, name, fn, len(arguments))
                    found.append(fn)
            setattr(self, name, tuple(found))

    def serves(self, hooks: Sequence[Any]) -> bool:
        """Whether this dispatch was made from exactly these hook objects."""
        mine = self.hooks
        return len(hooks) == len(mine) and all(map(is_, hooks, mine))


def hook_dispatch(config: AgentLoopConfig) -> HookDispatch:
    """The dispatch of ``config``'s hooks, made on the first call and kept on the config
    (rebuilt when its hooks are other objects). Raises ``ConfigurationError`` for a hook
    method that cannot take the arguments it is called with."""
    found: HookDispatch | None = config._hook_dispatch
    if found is None or not found.serves(config.hooks):
        found = HookDispatch(config.hooks)
        config._hook_dispatch = found
    return found


def hook_name(fn: Any) -> str:
    """How a failure names a hook method: ``MyHook.on_message``."""
    return str(getattr(fn, "__qualname__", None) or repr(fn))


def _implementation(hook: Any, name: str) -> HookFn | None:
    if not isinstance(hook, Hooks):  # any object with hook methods
        fn = getattr(hook, name, None)
        return fn if callable(fn) else None
    own = getattr(hook, "__dict__", None)
    if own is not None and name in own:  # set on the instance
        fn = own[name]
        return fn if callable(fn) else None
    if getattr(type(hook), name) is getattr(Hooks, name):
        return None  # the base class's does nothing
    fn = getattr(hook, name)
    return fn if callable(fn) else None


def _check_arguments(hook: Any, name: str, fn: HookFn, count: int) -> None:
    """Refuse a method that cannot be called with ``count`` positional arguments (a hook
    written for the shapes before the run handle): a clear error now, not a ``TypeError``
    in the middle of a run. Callables without code (builtins, partials) are not checked."""
    func = getattr(fn, "__func__", fn)
    code = getattr(func, "__code__", None)
    if code is None:
        return
    positional = code.co_argcount - (1 if inspect.ismethod(fn) else 0)
    required = positional - len(getattr(func, "__defaults__", None) or ())
    takes_more = bool(code.co_flags & inspect.CO_VARARGS)
    if required <= count and (positional >= count or takes_more):
        return
    expected = ", ".join(SIGNATURES[name])
    raise ConfigurationError(
        f"the hook {type(hook).__name__}.{name} ({hook_name(fn)}) takes {positional} "
        f"argument(s) but is called with ({expected}): every hook method gets the run "
        f"handle first, as in `def {name}(self, {expected})` (treadle 0.1.0; see "
        "docs/loop.md, Hooks)"
    )

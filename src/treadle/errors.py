"""The root of every exception treadle raises on purpose: ``except treadle.TreadleError``.

Each of treadle's exception classes derives from :class:`TreadleError` and keeps the
built-in base it always had (a :class:`~treadle.tools.ToolArgumentsError` is still a
``ValueError``, :class:`~treadle.agent.AgentBusy` still a ``RuntimeError``), so existing
``except ValueError`` clauses keep working. The tree is in docs/errors.md.

This module imports nothing: any module may import it, extras included.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConfigurationError",
    "MissingExtra",
    "OutOfRange",
    "StateError",
    "TreadleError",
    "UnknownName",
    "UsageError",
]


class TreadleError(Exception):
    """Base class of every exception treadle raises on purpose.

    Every one pickles and copies with its message and its fields (for process pools and
    task queues), whatever its constructor takes: see :func:`_rebuild`."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), self.args, self.__dict__)


def _rebuild(
    cls: type[BaseException], args: tuple[Any, ...], fields: dict[str, Any]
) -> BaseException:
    """An exception of ``cls`` with these ``args`` and attributes, made without calling its
    ``__init__``: the default unpickling calls ``cls(*args)``, which fails for a class whose
    constructor takes other arguments than its message (``ProviderError(kind, message)``)
    and would rebuild a derived message twice over."""
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(fields)
    return exc


class ConfigurationError(TreadleError, ValueError):
    """A setting or argument value treadle cannot work with (a ``base_url`` without
    ``http://`` or ``https://``, a malformed model string, two tools with one name, no
    prompt). Raised at once, never after a retry; the message says what to change."""


class UsageError(TreadleError, TypeError):
    """A call treadle cannot make sense of (a dict as a prompt, a message built with a
    positional argument, …); the message says how to write it."""


class OutOfRange(ConfigurationError, IndexError):
    """An index outside what it points into (``agent.branch(at_index=99)`` on a shorter
    history, cutting a session to more messages than it holds); still an ``IndexError``."""


class UnknownName(ConfigurationError, KeyError):
    """A name that is not among the choices (a profile to switch to); the message lists
    them. Still a ``KeyError``."""


class StateError(TreadleError, RuntimeError):
    """An operation the object cannot do in its current state (a result read before the
    run ended, a log added to after it closed, a server used outside its ``async with``);
    the message says what to do first."""


class MissingExtra(TreadleError, ImportError):
    """An optional part of treadle was imported without its extra installed; the message
    names the install that adds it (:func:`install_hint`)."""


def install_hint(extra: str) -> str:
    """How to install treadle's ``extra``, both ways: from a clone (an editable install;
    treadle is not on PyPI before its first release) and from PyPI once it is."""
    clone = f"pip install -e '.[{extra}]'"
    return f"from a clone, {clone}; once published, pip install 'treadle[{extra}]'"

"""``@tool``: a tool from a plain function, its schema from type hints and the docstring."""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import re
import warnings
from collections.abc import Callable
from typing import Any, get_type_hints, overload

import anyio.to_thread
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PydanticUserError,
    TypeAdapter,
    ValidationError,
    create_model,
)

from ..errors import ConfigurationError, UsageError
from ..types import ToolSpec
from .base import ToolArgumentsError, ToolCategory, ToolContext
from .results import drained
from .traits import ToolTraits, as_category

logger = logging.getLogger("treadle.tools")

_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns?|Raises|Yields|Examples?):\s*$"
)
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description, {param: description}) from a Google- or reST-style docstring."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        if m := _SECTION.match(line):
            section = m.group(1).lower()
            current = None
            continue
        if rest := re.match(r"^\s*:param\s+(?:\w+\s+)?(\w+):\s*(.*)$", line):
            params[rest.group(1)] = rest.group(2).strip()
            current, section = rest.group(1), "args"
            continue
        if re.match(r"^\s*:\w+", line):  # :type:, :returns:, :raises: ... end a parameter
            current, section = None, "fields"
            continue
        if section is None:
            description.append(line)
        elif section.startswith(("arg", "param")):
            if (m := _ARG_LINE.match(line)) and not line.startswith(" " * 8):
                current = m.group(1).lstrip("*")
                params[current] = m.group(2).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    text = "\n".join(description).strip()
    return text, params


def strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {
            k: strip_titles(v)
            for k, v in schema.items()
            if not (k == "title" and isinstance(v, str))
        }
    if isinstance(schema, list):
        return [strip_titles(v) for v in schema]
    return schema


def _is_context(annotation: Any) -> bool:
    origin = getattr(annotation, "__origin__", annotation)
    return inspect.isclass(origin) and issubclass(origin, ToolContext)


class FunctionTool:
    """A tool backed by a Python function (sync functions run in a worker thread).

    Calling the object calls the function itself, so decorated functions stay usable.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        category: ToolCategory | str = ToolCategory.EXEC,
        timeout: float | None = None,
        sequential: bool = False,
        accepts_raw_arguments: bool = False,
        idempotent: bool = False,
        retries: int = 0,
        eager: bool = False,
        requires_approval: bool = False,
    ) -> None:
        self.func = func
        self.name = _tool_name(func, name)
        doc_text, param_docs = parse_docstring(func.__doc__)
        self.description = description if description is not None else doc_text
        if not self.description:
            warnings.warn(
                f"tool {self.name!r} has no description: the model sees only its name. "
                "Give the function a docstring or pass description=.",
                UserWarning,
                stacklevel=_caller_level(),
            )
        try:
            self.traits = ToolTraits(
                category=as_category(category),
                timeout=timeout,
                sequential=sequential,
                eager=eager,
                idempotent=idempotent,
                retries=retries,
                requires_approval=requires_approval,
                accepts_raw_arguments=accepts_raw_arguments,
                validates_arguments=True,  # run() validates with pydantic
            )
        except ConfigurationError as exc:
            raise ConfigurationError(f"tool {self.name!r}: {exc}") from None
        # an async generator function runs on the loop too; it is drained into a list
        self._is_async = inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func)
        self._context_param: str | None = None
        self._method = False  # its first parameter is ``self``: unbound until read from an object
        self._attribute = self.name
        self._args_model = self._build_model(func, param_docs)
        self.parameters: dict[str, Any] = strip_titles(self._schema())
        self.parameters.setdefault("properties", {})
        functools.update_wrapper(self, func)

    def _build_model(self, func: Callable[..., Any], docs: dict[str, str]) -> type[BaseModel]:
        signature = inspect.signature(func)
        try:
            hints = get_type_hints(func, include_extras=True)
        except (NameError, TypeError) as exc:
            raise UsageError(
                f"@tool could not resolve the type hints of {func.__qualname__}: {exc}. "
                "Define the types it names before decorating it."
            ) from exc
        fields: dict[str, Any] = {}
        params = list(signature.parameters.values())
        if (
            params
            and params[0].name == "self"
            and params[0].kind == params[0].POSITIONAL_OR_KEYWORD
        ):
            self._method = True  # a method in a class body: a tool once bound (``__get__``)
            params = params[1:]
        for index, param in enumerate(params):
            pname = param.name
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise UsageError(_unnamed_error(self.name, param))
            if index == 0 and pname == "ctx" and pname not in hints:
                self._context_param = pname  # the context by name, as in the docs' examples
                continue
            if pname not in hints:
                warnings.warn(
                    f"parameter {pname!r} of tool {self.name!r} has no type hint, so the model "
                    "may send any JSON for it; annotate it (e.g. `a: int`).",
                    UserWarning,
                    stacklevel=_caller_level(),
                )
            annotation = hints.get(pname, Any)
            if _is_context(annotation):
                self._context_param = pname
                continue
            default = ... if param.default is param.empty else param.default
            fields[pname] = (annotation, Field(default, description=docs.get(pname)))
        model: type[BaseModel] = create_model(
            f"{self.name}_arguments",
            __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True),
            **fields,
        )
        self._fields = fields
        return model

    def _schema(self) -> dict[str, Any]:
        try:
            return self._args_model.model_json_schema()
        except PydanticUserError as exc:
            culprit = next(
                (pname for pname, spec in self._fields.items() if not _has_schema(spec)), None
            )
            where = f"parameter {culprit!r}" if culprit else "a parameter"
            annotation = self._fields[culprit][0] if culprit else None
            raise UsageError(
                f"tool {self.name!r}: {where} is annotated {annotation!r}, which has no JSON "
                "schema, so the model could not be told what to send. Use JSON-friendly "
                "types (str, int, float, bool, list, dict, pydantic models, Literal, Enum)."
            ) from exc

    @property
    def spec(self) -> ToolSpec:
        spec = ToolSpec(name=self.name, description=self.description, parameters=self.parameters)
        if getattr(self, "cache_point", False) is True:  # set on the tool: a cache point
            spec.cache_point = True
        return spec

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check ``arguments`` against the schema; returns the converted values."""
        try:
            validated = self._args_model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}"
                for err in exc.errors(include_url=False)
            )
            raise ToolArgumentsError(
                f"Invalid arguments for tool '{self.name}': {problems}"
            ) from None
        return {key: getattr(validated, key) for key in type(validated).model_fields}

    def __get__(self, instance: Any, owner: type | None = None) -> FunctionTool:
        """``@tool`` on a method: read from an object, it is a tool bound to that object
        (the same one on every read); read from the class, it is this unbound tool."""
        if instance is None or not self._method:
            return self
        bound = copy.copy(self)
        bound.func = self.func.__get__(instance, owner)
        bound._method = False
        try:  # kept on the object, so `obj.tool is obj.tool` (as functools.cached_property)
            kept: FunctionTool = vars(instance).setdefault(self._attribute, bound)
        except TypeError:  # no __dict__ (__slots__): a new bound tool on each read
            return bound
        return kept

    def __set_name__(self, owner: type, name: str) -> None:
        self._attribute = name  # where a bound copy is kept on an object

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> Any:
        if self._method:
            raise UsageError(
                f"tool {self.name!r} is a method: give the loop the tool read from an object "
                f"(`obj.{self.func.__name__}`), not from its class"
            )
        kwargs = self.validate(arguments)
        if self._context_param is not None:
            kwargs[self._context_param] = ctx
        if self._is_async:
            value = self.func(**kwargs)
            return await drained(value) if inspect.isasyncgen(value) else await value
        ctx._thread = True
        # A thread cannot be stopped: on a timeout or cancellation the loop stops waiting
        # for it and says so (see thread_still_running), and the function runs on.
        return await anyio.to_thread.run_sync(
            functools.partial(self._call_sync, kwargs, ctx), abandon_on_cancel=True
        )

    def _call_sync(self, kwargs: dict[str, Any], ctx: ToolContext[Any]) -> Any:
        """The plain function, in its worker thread; an awaitable it returns (``async``
        forgotten) fails here, named, before the thread hands it back (trio would refuse
        it with an error about its own wrapper)."""
        try:
            value = self.func(**kwargs)
        finally:
            ctx._thread = False
        if inspect.isgenerator(value):  # drained here, in the worker thread, not in the loop
            value = list(value)
        if inspect.isawaitable(value):
            error = unawaited_error(self.name, value)
            logger.warning("%s", error)  # a bug to fix: said where the developer looks too
            raise error
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool(name={self.name!r}, category={self.traits.category.value!r})"


def _unnamed_error(name: str, param: inspect.Parameter) -> UsageError:
    """The error for a parameter the model cannot name: a JSON object's properties are
    names, so ``*args``, ``**kwargs`` and positional-only parameters have no schema."""
    shown: dict[Any, str] = {
        param.VAR_POSITIONAL: f"*{param.name}",
        param.VAR_KEYWORD: f"**{param.name}",
    }
    what = shown.get(param.kind, f"{param.name} (positional-only)")
    return UsageError(
        f"tool {name!r}: parameter {what} cannot be described to the model, which sends "
        "arguments by name, so every call would fail. Declare each argument as a named, "
        "annotated parameter (e.g. `def search(query: str, limit: int = 10)`), or take one "
        "`dict` parameter for free-form data."
    )


def thread_still_running(ctx: ToolContext[Any]) -> bool:
    """Whether the call of ``ctx`` is a plain ``def`` tool whose worker thread has not
    returned yet (so a timeout could not stop it)."""
    return ctx._thread


def unawaited_error(name: str, value: Any) -> UsageError:
    """The error for a tool that returned a coroutine (or another awaitable) instead of its
    result — a plain ``def`` calling async code, ``async`` forgotten. A coroutine is closed
    here, unawaited, so no "never awaited" warning follows later."""
    if inspect.iscoroutine(value):
        value.close()
    return UsageError(
        f"tool {name!r} returned a {type(value).__name__} instead of a result: its function "
        "is a plain def that returned an awaitable, which nothing awaits. Declare it "
        f"`async def {name}(...)` (or await inside it) so the loop gets the value."
    )


_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _tool_name(func: Callable[..., Any], name: str | None) -> str:
    chosen: str = name or str(getattr(func, "__name__", ""))
    if chosen == "<lambda>":
        raise UsageError(
            "a lambda has no name to show the model: pass one, e.g. "
            "tool(name='add', description='Add two numbers.')(lambda a, b: a + b), "
            "or use a def with a docstring."
        )
    if not _NAME.match(chosen):
        raise ConfigurationError(
            f"tool name {chosen!r} is not allowed: providers accept 1-64 letters, digits, "
            "'_' and '-'. Pass name= to choose another."
        )
    return chosen


def _has_schema(spec: tuple[Any, Any]) -> bool:
    try:
        TypeAdapter(spec[0]).json_schema()
    except PydanticUserError:
        return False
    except Exception:  # an unresolvable type fails later with its own message
        return True
    return True


def _caller_level() -> int:
    """The stacklevel that points a warning at the user's ``@tool`` line."""
    frame = inspect.currentframe()
    level = 1
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
        level += 1
    return level - 1


@overload
def tool(func: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    category: ToolCategory | str = ToolCategory.EXEC,
    timeout: float | None = None,
    sequential: bool = False,
    accepts_raw_arguments: bool = False,
    idempotent: bool = False,
    retries: int = 0,
    eager: bool = False,
    requires_approval: bool = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    category: ToolCategory | str = ToolCategory.EXEC,
    timeout: float | None = None,
    sequential: bool = False,
    accepts_raw_arguments: bool = False,
    idempotent: bool = False,
    retries: int = 0,
    eager: bool = False,
    requires_approval: bool = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a tool from a function: ``@tool`` or ``@tool(name=..., category="info", ...)``.

    The JSON schema comes from the type hints (pydantic), descriptions from the docstring
    (``Args:`` section). A parameter annotated ``ToolContext`` receives the run's context and is
    not part of the schema. ``idempotent=True`` says running it twice is safe (read-only, or
    the same effect again): only such a tool is retried on failure (``retries``: how many
    more attempts after a raised exception) or run again where a call's outcome is unknown.
    ``eager=True`` (implies ``idempotent``) lets the loop start a call while the model is
    still streaming the rest of its answer (under the parallel strategy; see docs/loop.md).
    ``requires_approval=True`` makes each call wait for a person (an ``Ask``) unless a
    ``before_tool_call`` hook decides first. These become the tool's ``traits``
    (:class:`~treadle.tools.ToolTraits`, where each is described).

    Args:
        func: The function (sync or async), when used as a bare ``@tool``.
        name: The tool's name (default: the function's).
        description: What the model reads (default: the docstring's summary).
        category: ``info``, ``exec``, ``edit`` … (sets the default timeout).
        timeout: Seconds a call may take (None: the config's, else the category's).
        sequential: Never run alongside other calls of the turn.
        accepts_raw_arguments: Take the model's arguments unvalidated.
        idempotent: Running it twice is safe.
        retries: More attempts after a raised exception (idempotent tools only).
        eager: Start a call while the answer still streams (implies ``idempotent``).
        requires_approval: Each call waits for a person unless a hook decides.

    Returns:
        A :class:`~treadle.tools.FunctionTool` (or, with keywords only, the decorator
        that makes one).

    Raises:
        ConfigurationError: a bad trait value (``timeout=0``, ``retries`` without
            ``idempotent``, an unknown category).
    """

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            f,
            name=name,
            description=description,
            category=category,
            timeout=timeout,
            sequential=sequential,
            accepts_raw_arguments=accepts_raw_arguments,
            idempotent=idempotent,
            retries=retries,
            eager=eager,
            requires_approval=requires_approval,
        )

    return wrap(func) if func is not None else wrap

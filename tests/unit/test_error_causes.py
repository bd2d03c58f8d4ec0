"""Errors keep their cause: an unexpected exception that ends a run is logged with its
traceback and carried on the result; a provider bug has a kind of its own and is not
retried; every public exception survives pickling and copying (process pools, DBOS,
Celery)."""

from __future__ import annotations

import copy
import importlib
import inspect
import logging
import pickle
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from treadle import Agent, AgentContext, AgentEvent, AgentLoopConfig, Hooks, agent_loop
from treadle._signals import HookFailed, RunLimitHit, ToolRaised
from treadle.agent import RunResult
from treadle.errors import MissingExtra
from treadle.providers import ModelRequest, ProviderError, StreamEvent
from treadle.providers.base import RETRYABLE_KINDS
from treadle.testing import ScriptedProvider
from treadle.types import AgentEnd

ROOT = Path(__file__).resolve().parents[2]


def _public_modules() -> list[str]:
    spec = importlib.util.spec_from_file_location(
        "api_snapshot", ROOT / "scripts" / "api_snapshot.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.PUBLIC)


def public_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class a public module exports (extras included when installed)."""
    found: dict[str, type[BaseException]] = {}
    for name in _public_modules():
        try:
            module = importlib.import_module(name)
        except MissingExtra:
            continue
        for export in getattr(module, "__all__", ()):
            value = getattr(module, export)
            if inspect.isclass(value) and issubclass(value, BaseException):
                found[value.__qualname__] = value
    return found


# How to build one of each class whose constructor is not ``cls(message)``, with every
# field set to something other than its default, so a field lost on the way shows.
EXAMPLES: dict[str, Callable[[Any], BaseException]] = {
    "ProviderError": lambda cls: cls(
        "rate_limit", "slow down", status_code=429, retry_after=2.5, provider="openai"
    ),
    "RunFailed": lambda cls: cls(RunResult(reason="limit")),
    "TaskComplete": lambda cls: cls("all done", details={"files": 3}),
    "MCPError": lambda cls: cls(
        "cannot reach", server="files", where="http://127.0.0.1:1", status=503, cause="refused"
    ),
    "RequestError": lambda cls: cls("bad frame", status=422),
    "UnknownName": lambda cls: cls("no profile 'x'"),
    "EvalRegression": lambda cls: cls(_comparison()),
    "SessionBlobError": lambda cls: cls(
        "a file is missing",
        session_id="s1",
        index=3,
        digest="sha256:" + "ab" * 32,
        name="q3.pdf",
        reason="damaged",
    ),
}


def _comparison() -> Any:
    from treadle.evals import CaseChange, Comparison

    change = CaseChange(
        case="a",
        model="m",
        before=1.0,
        after=0.5,
        pass_rate_before=1.0,
        pass_rate_after=0.5,
        status="regressed",
    )
    return Comparison(threshold=0.1, baseline="last", cases=[change])


def example(cls: type[BaseException]) -> BaseException:
    make = EXAMPLES.get(cls.__name__)
    return make(cls) if make is not None else cls(f"a {cls.__name__} happened")


PUBLIC = public_exceptions()


def test_the_walk_finds_the_public_exceptions() -> None:
    assert {"ProviderError", "RunFailed", "TreadleError", "SessionLocked"} <= set(PUBLIC)
    assert len(PUBLIC) >= 20


def _fields(exc: BaseException) -> tuple[Any, ...]:
    return (type(exc), exc.args, str(exc), repr(exc), _comparable(vars(exc)))


def _comparable(values: dict[str, Any]) -> dict[str, Any]:
    """Attributes, a pydantic model (RunFailed.result) compared by its dump."""
    return {
        key: value.model_dump() if hasattr(value, "model_dump") else value
        for key, value in values.items()
    }


@pytest.mark.parametrize("name", sorted(PUBLIC))
@pytest.mark.parametrize(
    "round_trip",
    [
        lambda exc: pickle.loads(pickle.dumps(exc)),
        copy.copy,
        copy.deepcopy,
    ],
    ids=["pickle", "copy", "deepcopy"],
)
def test_every_public_exception_round_trips(
    name: str, round_trip: Callable[[BaseException], BaseException]
) -> None:
    original = example(PUBLIC[name])
    again = round_trip(original)
    assert again is not original
    assert _fields(again) == _fields(original)


def test_a_provider_error_keeps_its_fields_through_pickle() -> None:
    error = ProviderError("overloaded", "busy", status_code=529, retry_after=1.0, provider="x")
    again = pickle.loads(pickle.dumps(error))
    assert (again.kind, again.message, again.status_code, again.retry_after, again.provider) == (
        "overloaded",
        "busy",
        529,
        1.0,
        "x",
    )
    assert again.retryable and str(again) == str(error)


# ---------------------------------------------------------------- a provider bug


class BuggyProvider:
    """An adapter with a bug: it reads ``.type`` of something that is None."""

    name = "buggy"
    model = "buggy-model"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(
        self, request: ModelRequest, *, cancel: Any = None
    ) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        chunk: Any = None
        yield chunk.type  # AttributeError: 'NoneType' object has no attribute 'type'


def _loop_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "treadle.loop" and r.exc_info]


@pytest.mark.anyio
async def test_a_provider_bug_has_its_own_kind_is_not_retried_and_keeps_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = BuggyProvider()
    with caplog.at_level(logging.ERROR, logger="treadle.loop"):
        result = await Agent(provider).run("hi")
    assert provider.calls == 1  # not retried, though the default policy retries "server"
    assert result.reason == "error"
    error = result.error
    assert error is not None and error.kind == "provider_bug"
    assert "provider_bug" not in RETRYABLE_KINDS
    assert error.traceback is not None
    assert "Traceback (most recent call last)" in error.traceback
    assert "yield chunk.type" in error.traceback  # the line of the bug
    assert "AttributeError: 'NoneType' object has no attribute 'type'" in error.traceback
    records = _loop_records(caplog)
    assert records, "the bug was not logged with its traceback"
    exc_info = records[0].exc_info
    assert exc_info is not None and isinstance(exc_info[1], AttributeError)


@pytest.mark.anyio
async def test_agent_end_carries_the_traceback_of_a_provider_bug() -> None:
    send, receive = anyio.create_memory_object_stream[AgentEvent](100)
    async with send:
        await agent_loop("hi", AgentContext(), AgentLoopConfig(provider=BuggyProvider()), send)
    async with receive:
        events = [event async for event in receive]
    end = events[-1]
    assert isinstance(end, AgentEnd) and end.error is not None
    assert end.error.kind == "provider_bug" and end.error.traceback is not None
    assert "AttributeError" in end.error.traceback
    assert "traceback" in end.model_dump_json()  # it travels with the event


class LeakyProvider:
    """A provider whose bug puts a URL with credentials and a bearer token in a message."""

    name = "leaky"
    model = "m"

    async def stream(
        self, request: ModelRequest, *, cancel: Any = None
    ) -> AsyncIterator[StreamEvent]:
        raise RuntimeError(
            "cannot call https://me:hunter2-password@api.example/v1?key=sk-secret-0123456789"
            " with Authorization: Bearer sk-bearer-0123456789"
        )
        yield  # an async generator


@pytest.mark.anyio
async def test_a_traceback_on_the_result_is_scrubbed_of_secrets() -> None:
    result = await Agent(LeakyProvider()).run("hi")
    assert result.error is not None and result.error.traceback is not None
    text = result.error.traceback + result.error.message
    for secret in ("hunter2-password", "sk-secret-0123456789", "sk-bearer-0123456789"):
        assert secret not in text
    assert "api.example" in result.error.traceback  # the rest stays readable


# ---------------------------------------------------------------- a hook's bug


class LookupHook(Hooks):
    """A hook whose lookup fails (any call shape: it takes whatever the loop passes)."""

    async def before_model_request(self, *args: Any) -> Any:
        settings: dict[str, str] = {}
        return settings["model"]


@pytest.mark.anyio
async def test_a_hook_raising_keyerror_ends_the_run_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = ScriptedProvider(["never asked"])
    send, receive = anyio.create_memory_object_stream[AgentEvent](100)
    config = AgentLoopConfig(provider=provider, hooks=[LookupHook()])
    with caplog.at_level(logging.ERROR, logger="treadle.loop"):
        async with send:
            await agent_loop("hi", AgentContext(), config, send)
    async with receive:
        events = [event async for event in receive]
    end = events[-1]
    assert isinstance(end, AgentEnd) and end.reason == "error" and end.error is not None
    assert end.error.kind == "hook"
    assert end.error.traceback is not None
    assert 'return settings["model"]' in end.error.traceback
    assert "KeyError: 'model'" in end.error.traceback
    records = _loop_records(caplog)
    assert records and records[0].exc_info is not None
    assert isinstance(records[0].exc_info[1], KeyError)


@pytest.mark.anyio
async def test_the_agents_result_has_the_hooks_traceback() -> None:
    result = await Agent(ScriptedProvider(["never asked"]), hooks=[LookupHook()]).run("hi")
    assert result.reason == "error" and result.error is not None
    assert result.error.kind == "hook" and result.error.traceback is not None
    assert "KeyError" in result.error.traceback


@pytest.mark.parametrize(
    "signal",
    [HookFailed("on_message", KeyError("model")), ToolRaised(SystemExit(3)), RunLimitHit("x")],
    ids=lambda s: type(s).__name__,
)
def test_internal_signals_pickle_and_copy_too(signal: Exception) -> None:
    for again in (pickle.loads(pickle.dumps(signal)), copy.copy(signal), copy.deepcopy(signal)):
        assert type(again) is type(signal) and str(again) == str(signal)
        assert repr(vars(again)) == repr(vars(signal))

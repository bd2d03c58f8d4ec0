"""Test doubles for applications' own tests: a scripted provider (and wire-level fakes)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .cassette import Cassette, CassetteError, NoMatchingExchange
from .google import GoogleOAuthFake
from .offline import OfflineProvider
from .scripted import ScriptedProvider, ScriptItem
from .server import serve
from .wire import (
    Fail,
    FakeTransport,
    Raw,
    RecordedRequest,
    Slow,
    StreamError,
    Truncate,
    WireFake,
    WireItem,
)

if TYPE_CHECKING:
    from .aws import SigV4Check
    from .azure import AzureFake, content_filtered
    from .entra import EntraID

# Cloud fakes, imported on first use (their servers need modules the others do not).
_LAZY = {
    "AzureFake": ".azure",
    "content_filtered": ".azure",
    "EntraID": ".entra",
    "SigV4Check": ".aws",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'treadle.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "AzureFake",
    "Cassette",
    "CassetteError",
    "EntraID",
    "Fail",
    "FakeTransport",
    "GoogleOAuthFake",
    "NoMatchingExchange",
    "OfflineProvider",
    "Raw",
    "RecordedRequest",
    "ScriptItem",
    "ScriptedProvider",
    "SigV4Check",
    "Slow",
    "StreamError",
    "Truncate",
    "WireFake",
    "WireItem",
    "content_filtered",
    "serve",
]

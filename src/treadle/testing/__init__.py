"""Test doubles for applications' own tests: a scripted provider (and wire-level fakes)."""

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

__all__ = [
    "Cassette",
    "CassetteError",
    "Fail",
    "FakeTransport",
    "GoogleOAuthFake",
    "NoMatchingExchange",
    "OfflineProvider",
    "Raw",
    "RecordedRequest",
    "ScriptItem",
    "ScriptedProvider",
    "Slow",
    "StreamError",
    "Truncate",
    "WireFake",
    "WireItem",
    "serve",
]

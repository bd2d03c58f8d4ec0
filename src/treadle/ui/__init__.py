"""Serve an agent to web front ends in their own protocols.

- :mod:`treadle.ui.ag_ui` — AG-UI (CopilotKit, ``@ag-ui/client``): ``ag_ui_app(agent)``.
- :mod:`treadle.ui.vercel_ai` — the Vercel AI SDK UI message stream (``useChat``):
  ``vercel_ai_app(agent)``.

Both keep each run's frames under cursors taken from the events' ``seq``, so a client whose
connection dropped resumes with no gap and no duplicate. The ASGI apps need the ``web``
extra (Starlette); the translation and the runs themselves need nothing beyond treadle.

Every app is guarded the same way (``Host``, ``Origin``, an optional token, body limits:
see docs/security.md); :func:`serve` runs one with uvicorn and a request deadline.
"""

from ._guard import DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY_BYTES, HTTPGuard, load_json
from ._runs import (
    EncodedEvent,
    EncodedEventLog,
    EventEncoder,
    Frame,
    FrameLog,
    LiveRun,
    RequestError,
    UIRuns,
    format_cursor,
    parse_cursor,
)
from ._serve import serve

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "EncodedEvent",
    "EncodedEventLog",
    "EventEncoder",
    "Frame",
    "FrameLog",
    "HTTPGuard",
    "LiveRun",
    "RequestError",
    "UIRuns",
    "format_cursor",
    "load_json",
    "parse_cursor",
    "serve",
]

"""Event logs and SSE helpers for serving a run's events over HTTP.

The loop reports events on one stream; these keep them for readers who join late or
reconnect (:class:`EventLog`, keyed by ``seq``; :class:`KeyedLog`, the mechanism under it),
and write them as Server-Sent Events (:func:`sse_frame`, :func:`last_event_id`). Nothing
here runs a loop: :mod:`treadle.loop` does that, and never imports this module.
"""

from ._eventlog import EventLog, last_event_id, sse_frame
from ._keyedlog import EventLogGap, KeyedLog

__all__ = ["EventLog", "EventLogGap", "KeyedLog", "last_event_id", "sse_frame"]

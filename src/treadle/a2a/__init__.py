"""Agent-to-agent (A2A): a treadle agent served to other agents, and theirs called as
tools, over the official ``a2a-sdk`` (A2A 1.0; ``pip install treadle[a2a]``).

::

    from treadle.a2a import A2AAgent, a2a_app

    app = a2a_app(agent, token=os.environ["A2A_TOKEN"])   # ASGI: uvicorn, treadle.ui.serve
    remote = A2AAgent("http://127.0.0.1:8000", token=os.environ["A2A_TOKEN"])
    lead = Agent("openai:gpt-4o", tools=[remote])          # the remote agent as a tool

See docs/a2a.md.
"""

from __future__ import annotations

from ..errors import MissingExtra, install_hint

try:
    import starlette as _starlette  # noqa: F401

    import a2a as _a2a  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise MissingExtra(f"treadle.a2a needs the A2A SDK: {install_hint('a2a')}") from exc

from ._card import build_card
from ._client import A2AAgent, A2AError, A2ATool
from ._executor import TreadleExecutor
from ._server import A2AServer, a2a_app

__all__ = [
    "A2AAgent",
    "A2AError",
    "A2AServer",
    "A2ATool",
    "TreadleExecutor",
    "a2a_app",
    "build_card",
]

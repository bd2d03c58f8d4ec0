"""Optional engine features built on treadle's public API (hooks, tools, providers).

Nothing here is imported by ``import treadle``; import the module you need:

- ``treadle.ext.memory``: durable facts on SQLite (FTS5), recalled into a fresh conversation.
- ``treadle.ext.skills``: a skill catalog (``SKILL.md`` folders) and a Thompson-sampling router.
- ``treadle.ext.auto_skills``: drafts a skill after repeated successes on one kind of task.
- ``treadle.ext.plan_mode``: a read-only planning mode the model enters and leaves by tools.
- ``treadle.ext.mcp_curation``: offers only the most recently used MCP tools.
- ``treadle.ext.workflow``: a gate that may answer an input itself, without the model.
- ``treadle.ext.style``: the user's writing style, observed per run, as a prompt hint.
- ``treadle.ext.routing``: a cheap model for short turns; the long prompt-cache tier.
- ``treadle.ext.profiles``: profiles (prompt, tools, planning, turn cap) switched mid-run.
- ``treadle.ext.workers``: post-run workers (a run summary into memory) and session-end hooks.

``treadle.ext.engine(db=...)`` builds all of them at once, hooks in the right order
(:class:`~treadle.ext._engine.Engine`); importing ``treadle.ext`` alone imports none of
the modules until it is called.

See docs/ext.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._engine import Engine, engine

__all__ = ["Engine", "engine"]


def __getattr__(name: str) -> Any:
    if name in ("Engine", "engine"):
        from . import _engine

        return getattr(_engine, name)
    raise AttributeError(f"module 'treadle.ext' has no attribute {name!r}")

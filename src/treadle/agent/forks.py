"""New agents made from an agent: the bare copy :meth:`Agent.branch` and :meth:`Agent.fork`
start from, and the fork itself (same model, tools and settings; a conversation of its
own). Typed generically so this module needs nothing from ``agent.py``."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, TypeVar

from ..types import ContinuationKind, Usage

if TYPE_CHECKING:
    from ..sessions import SessionStore

A = TypeVar("A")


def clone_agent(agent: A) -> A:
    """A copy sharing settings, with no run state and no session (the caller gives it a
    context)."""
    clone: A = object.__new__(type(agent))
    fields = vars(clone)
    fields.update(vars(agent))
    fields.update(usage=Usage(), _running=False, _token=None, _sink=None, _recorder=None)
    fields.update(_steer_after=[], _steer_next=[], _interrupts=[], _follow_ups=[])
    return clone


def fork_agent(agent: A, session_id: str | None, store: SessionStore | None) -> A:
    """See :meth:`Agent.fork`."""
    source: Any = agent
    clone: Any = clone_agent(agent)
    clone.context = source.context.model_copy(
        update={"messages": [], "approvals": {}, "state": {}, "agent_id": str(uuid.uuid4())}
    )
    clone.context.loop_id = clone.context.parent_loop_id = None
    clone.context.continuation_kind = ContinuationKind.INITIAL
    clone.context.session_id = session_id or str(uuid.uuid4())
    clone.store = store = store or source.store
    if store is not None:
        clone._open_session(store, session_id)
    result: A = clone
    return result

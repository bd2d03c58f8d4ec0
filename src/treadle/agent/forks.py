"""New agents made from an agent: the bare copy :meth:`Agent.branch` and :meth:`Agent.fork`
start from, and the fork itself (same model, tools and settings; a conversation of its
own). Typed generically so this module needs nothing from ``agent.py``."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import OutOfRange
from ..types import ContinuationKind, Usage
from .tally import usage_of

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
    # The provider (and its HTTP client) is shared and stays the original's: closing a
    # branch, a fork or an ephemeral copy never closes it under the original's runs.
    fields.update(_owns_provider=False)
    return clone


def branch_agent(agent: A, at_index: int | None) -> A:
    """See :meth:`Agent.branch`."""
    source: Any = agent
    count = len(source.messages)
    at = count if at_index is None else at_index
    if at < 0:
        at += count
    if not 0 <= at <= count:
        raise OutOfRange(f"at_index {at_index} is outside a history of {count} messages")
    clone: Any = clone_agent(agent)
    clone.context = source.context.model_copy(
        update={
            "messages": [],
            "approvals": {},
            "suspended": {},
            "state": {},
            "agent_id": str(uuid.uuid4()),
            "loop_id": None,
            "parent_loop_id": source.context.loop_id,
            "continuation_kind": ContinuationKind.BRANCH,
        }
    )
    if source._recorder is not None and source.store is not None:
        source._recorder.sync_now()
        new_id = source.store.branch(source.session_id, at, agent_id=clone.context.agent_id)
        clone._open_session(source.store, new_id)
    else:
        from ..sessions import repair_history

        prefix = [m.model_copy(deep=True) for m in source.messages[:at]]
        clone.context.messages = repair_history(prefix)[0]
        clone.context.session_id = str(uuid.uuid4())
        clone.usage = usage_of(clone.context.messages)
    result: A = clone
    return result


def fork_agent(agent: A, session_id: str | None, store: SessionStore | None) -> A:
    """See :meth:`Agent.fork`."""
    source: Any = agent
    clone: Any = clone_agent(agent)
    clone.context = source.context.model_copy(
        update={
            "messages": [],
            "approvals": {},
            "suspended": {},
            "state": {},
            "agent_id": str(uuid.uuid4()),
        }
    )
    clone.context.loop_id = clone.context.parent_loop_id = None
    clone.context.continuation_kind = ContinuationKind.INITIAL
    clone.context.session_id = session_id or str(uuid.uuid4())
    clone.store = store = store or source.store
    if store is not None:
        clone._open_session(store, session_id)
    result: A = clone
    return result

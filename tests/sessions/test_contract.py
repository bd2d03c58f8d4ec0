"""One contract, three stores: every SessionStore behaves the same."""

from __future__ import annotations

import gc
from collections.abc import Callable

import pytest

from treadle import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage
from treadle.context import validate_transcript
from treadle.sessions import (
    CANCELLED_TEXT,
    SessionError,
    SessionExists,
    SessionLocked,
    SessionNotFound,
    SessionStore,
    SessionWriter,
)
from treadle.types import Citation, ErrorInfo, ExtensionMessage, ImageContent, ThinkingContent

StoreFactory = Callable[[], SessionStore]


def dumps(messages: list) -> list[str]:
    return [m.model_dump_json() for m in messages]


def every_kind() -> list:
    """One message of every role, with every content block and optional field in use."""
    return [
        UserMessage(
            content=[
                TextContent(text='Look at this ✓ \n and "quote"'),
                ImageContent(data="aGVsbG8=", mime_type="image/png"),
            ]
        ),
        AssistantMessage(
            content=[
                ThinkingContent(thinking="hmm", signature="sig==", redacted=False),
                TextContent(
                    text="Let me check.",
                    citations=[
                        Citation(
                            kind="url_citation",
                            url="https://example.com/a",
                            title="A",
                            start=0,
                            end=6,
                        ),
                        Citation(
                            kind="page_location",
                            title="Guide ✓",
                            cited_text="p. 2",
                            document_index=1,
                            source_start=2,
                            source_end=3,
                        ),
                    ],
                ),
                ToolCall(id="c1", name="look", arguments={"x": [1, 2, {"y": None}]}),
                ToolCall(id="c2", name="bad", arguments={}, raw_arguments="{not json"),
            ],
            stop_reason="tool_use",
            model="m-1",
            provider="p",
            usage=Usage(input=10, output=5, reasoning=2, total_tokens=15, cost_usd=0.001),
            response_id="resp_1",
        ),
        ToolResultMessage(
            tool_call_id="c1",
            tool_name="look",
            content=[TextContent(text="found")],
            details={"rows": [1, 2], "nested": {"ok": True}},
        ),
        ToolResultMessage(tool_call_id="c2", tool_name="bad", content="oops", is_error=True),
        ExtensionMessage(kind="note", data={"any": ["json", 1.5]}),
        AssistantMessage(
            content=[TextContent(text="failed")],
            stop_reason="error",
            error=ErrorInfo(kind="server", message="boom", status_code=503),
        ),
    ]


def test_create_append_load_round_trips_every_kind(make_store: StoreFactory) -> None:
    store = make_store()
    sid = store.create()
    assert store.exists(sid)
    messages = every_kind()
    with store.open_writer(sid) as writer:
        assert isinstance(writer, SessionWriter)
        assert writer.append(messages[0]) == 0
        assert writer.extend(messages[1:]) == len(messages)
        assert writer.length == len(messages)
    loaded = make_store().load(sid)
    assert dumps(loaded.messages) == dumps(messages)
    assert loaded.messages == messages
    assert loaded.info.message_count == len(messages)
    assert loaded.info.title == 'Look at this ✓ and "quote"'
    assert loaded.repaired_tool_calls == [] and not loaded.torn_tail


def test_protocol_and_info(store: SessionStore) -> None:
    assert isinstance(store, SessionStore)
    sid = store.create("my-session.1", agent_id="agent-7")
    info = store.info(sid)
    assert info.id == "my-session.1" and info.agent_id == "agent-7"
    assert info.title is None and info.message_count == 0 and info.parent_id is None
    assert info.created_at == info.updated_at > 1_600_000_000_000  # unix ms
    with pytest.raises(SessionExists):
        store.create("my-session.1")
    for bad in ("../etc/passwd", "", ".hidden", "a/b", "x" * 200):
        with pytest.raises(ValueError):
            store.create(bad)


def test_missing_sessions(store: SessionStore) -> None:
    assert not store.exists("nope")
    assert not store.exists("../bad")
    for call in (store.info, store.load, store.open_writer, store.delete):
        with pytest.raises(SessionNotFound):
            call("nope")
    with pytest.raises(SessionNotFound):
        store.branch("nope", 0)


def test_list_is_newest_first(store: SessionStore) -> None:
    a, b, c = store.create(), store.create(), store.create()
    assert [i.id for i in store.list()] == [c, b, a]
    store.append(a, UserMessage.of("wake up"))
    listed = store.list()
    assert [i.id for i in listed] == [a, c, b]
    assert listed[0].title == "wake up" and listed[0].message_count == 1
    assert [i.id for i in store.list(limit=2)] == [a, c]


def test_delete(make_store: StoreFactory) -> None:
    store = make_store()
    sid = store.create()
    store.append(sid, UserMessage.of("bye"))
    store.delete(sid)
    assert not store.exists(sid)
    assert not make_store().exists(sid)
    assert store.list() == []


def test_truncate_is_logged_and_applied(make_store: StoreFactory) -> None:
    store = make_store()
    sid = store.create()
    with store.open_writer(sid) as writer:
        writer.extend([UserMessage.of("1"), AssistantMessage(content="2"), UserMessage.of("3")])
        writer.truncate(1)
        assert writer.length == 1
        writer.append(AssistantMessage(content="2b"))
        with pytest.raises(IndexError):
            writer.truncate(5)
    loaded = make_store().load(sid)
    assert [m.text for m in loaded.messages] == ["1", "2b"]  # type: ignore[union-attr]
    assert loaded.info.message_count == 2


def test_unanswered_calls_are_repaired_as_cancelled(make_store: StoreFactory) -> None:
    store = make_store()
    sid = store.create()
    call = AssistantMessage(
        content=[ToolCall(id="a", name="t"), ToolCall(id="b", name="t")], stop_reason="tool_use"
    )
    result_a = ToolResultMessage(tool_call_id="a", tool_name="t", content="done")
    with store.open_writer(sid) as writer:
        writer.extend([UserMessage.of("go"), call, result_a])
    loaded = make_store().load(sid)
    assert loaded.repaired_tool_calls == ["b"]
    last = loaded.messages[-1]
    assert isinstance(last, ToolResultMessage) and last.tool_call_id == "b"
    assert last.text == CANCELLED_TEXT and last.is_error
    assert validate_transcript(loaded.messages) == []
    raw = make_store().load(sid, repair=False)
    assert len(raw.messages) == 3 and raw.repaired_tool_calls == []


def test_pending_calls_of_a_suspended_run_stay_open(make_store: StoreFactory) -> None:
    store = make_store()
    sid = store.create()
    call = AssistantMessage(content=[ToolCall(id="ask", name="rm")], stop_reason="tool_use")
    with store.open_writer(sid) as writer:
        writer.extend([UserMessage.of("delete it"), call])
        writer.set_pending(["ask"])
    loaded = make_store().load(sid)
    assert loaded.pending_tool_calls == ["ask"] and loaded.repaired_tool_calls == []
    assert loaded.messages[-1] == call
    with make_store().open_writer(sid) as writer:  # the run resumed and answered it
        writer.append(ToolResultMessage(tool_call_id="ask", tool_name="rm", content="ok"))
    again = make_store().load(sid)
    assert again.pending_tool_calls == [] and validate_transcript(again.messages) == []


def test_what_a_suspended_run_waits_with_is_kept(make_store: StoreFactory) -> None:
    # A call that asked mid-call suspends with a question and the tool's saved state: both
    # come back on load (a copy), only for calls still pending; a value that is not JSON is
    # refused with an error naming the call.
    store = make_store()
    sid = store.create()
    call = AssistantMessage(
        content=[ToolCall(id="pay", name="pay"), ToolCall(id="rm", name="rm")],
        stop_reason="tool_use",
    )
    saved = {"step": 1, "task": {"id": "t-1", "context": None}}
    with store.open_writer(sid) as writer:
        writer.extend([UserMessage.of("pay it"), call])
        writer.set_pending(["pay", "rm"], {"pay": {"prompt": "Pay 500?", "saved": saved}})
        with pytest.raises(SessionError, match=r"'pay'.*not JSON"):
            writer.set_pending(["pay"], {"pay": {"saved": object()}})
    loaded = make_store().load(sid)
    assert loaded.pending_tool_calls == ["pay", "rm"]
    assert loaded.suspensions == {"pay": {"prompt": "Pay 500?", "saved": saved}}
    with make_store().open_writer(sid) as writer:  # the run resumed and answered one
        writer.append(ToolResultMessage(tool_call_id="pay", tool_name="pay", content="ok"))
    assert make_store().load(sid).suspensions == {}


def test_one_writer_at_a_time(make_store: StoreFactory) -> None:
    store = make_store()
    sid = store.create()
    first = store.open_writer(sid)
    with pytest.raises(SessionLocked):
        store.open_writer(sid)
    with pytest.raises(SessionLocked):
        make_store().open_writer(sid)  # another store object on the same data
    with pytest.raises(SessionLocked):
        store.append(sid, UserMessage.of("sneaky"))
    with pytest.raises(SessionLocked):
        store.delete(sid)
    first.append(UserMessage.of("mine"))
    first.close()
    first.close()  # idempotent
    with pytest.raises(Exception, match="closed"):
        first.append(UserMessage.of("late"))
    with store.open_writer(sid) as second:
        second.append(UserMessage.of("yours"))
    assert [m.text for m in store.load(sid).messages] == ["mine", "yours"]  # type: ignore[union-attr]


def test_a_forgotten_writer_releases_its_lock(store: SessionStore) -> None:
    sid = store.create()
    store.open_writer(sid)  # dropped at once
    gc.collect()
    store.open_writer(sid).close()


def test_other_sessions_are_not_locked(store: SessionStore) -> None:
    a, b = store.create(), store.create()
    with store.open_writer(a), store.open_writer(b) as wb:
        wb.append(UserMessage.of("b"))


def history(n: int, start: int = 0) -> list:
    return [
        UserMessage.of(f"u{i}") if i % 2 == 0 else AssistantMessage(content=f"a{i}")
        for i in range(start, start + n)
    ]


def texts(messages: list) -> list[str]:
    return [m.text for m in messages]


def test_branch_shares_the_prefix_and_leaves_the_original(make_store: StoreFactory) -> None:
    store = make_store()
    parent = store.create()
    with store.open_writer(parent) as w:
        w.extend(history(4))
    child = store.branch(parent, 2)
    info = store.info(child)
    assert info.parent_id == parent and info.branch_index == 2 and info.message_count == 2
    assert info.title == "u0"
    assert texts(store.load(child).messages) == ["u0", "a1"]
    with store.open_writer(child) as w:
        w.append(UserMessage.of("other"))
    with store.open_writer(parent) as w:
        w.append(UserMessage.of("u4"))
    reopened = make_store()
    assert texts(reopened.load(parent).messages) == ["u0", "a1", "u2", "a3", "u4"]
    assert texts(reopened.load(child).messages) == ["u0", "a1", "other"]
    assert texts(store.load(store.branch(parent, 0)).messages) == []
    assert texts(store.load(store.branch(parent, 5)).messages)[-1] == "u4"
    with pytest.raises(IndexError):
        store.branch(parent, 6)
    with pytest.raises(IndexError):
        store.branch(parent, -1)


def test_branch_is_immune_to_later_truncation_of_its_parent(make_store: StoreFactory) -> None:
    store = make_store()
    parent = store.create()
    with store.open_writer(parent) as w:
        w.extend(history(4))
        child = store.branch(parent, 3)
        w.truncate(1)  # e.g. Agent.continue_ / restore on the parent
        w.append(AssistantMessage(content="new"))
    grandchild = store.branch(child, 2)
    assert texts(make_store().load(child).messages) == ["u0", "a1", "u2"]
    assert texts(make_store().load(parent).messages) == ["u0", "new"]
    assert texts(make_store().load(grandchild).messages) == ["u0", "a1"]


def test_branch_chains_and_deleting_a_parent(make_store: StoreFactory) -> None:
    store = make_store()
    root = store.create()
    with store.open_writer(root) as w:
        w.extend(history(4))
    mid = store.branch(root, 3)
    with store.open_writer(mid) as w:
        w.append(AssistantMessage(content="m3"))
    leaf = store.branch(mid, 4)
    with store.open_writer(leaf) as w:
        w.append(UserMessage.of("leaf"))
    expected_mid = ["u0", "a1", "u2", "m3"]
    expected_leaf = [*expected_mid, "leaf"]
    store.delete(root)
    reopened = make_store()
    assert texts(reopened.load(mid).messages) == expected_mid
    assert texts(reopened.load(leaf).messages) == expected_leaf
    assert reopened.info(mid).parent_id == root  # provenance is kept
    store.delete(mid)
    assert texts(make_store().load(leaf).messages) == expected_leaf
    with store.open_writer(leaf) as w:
        w.truncate(2)
        w.append(UserMessage.of("after"))
    assert texts(make_store().load(leaf).messages) == ["u0", "a1", "after"]
    assert [i.id for i in make_store().list()] == [leaf]


def test_branch_inside_a_tool_batch_repairs_on_load(store: SessionStore) -> None:
    sid = store.create()
    with store.open_writer(sid) as w:
        w.extend(
            [
                UserMessage.of("go"),
                AssistantMessage(content=[ToolCall(id="x", name="t")], stop_reason="tool_use"),
                ToolResultMessage(tool_call_id="x", tool_name="t", content="r"),
            ]
        )
    child = store.branch(sid, 2)
    loaded = store.load(child)
    assert loaded.repaired_tool_calls == ["x"]
    assert validate_transcript(loaded.messages) == []
    assert len(store.load(sid).messages) == 3

"""Messages and blocks count attribute assignments once watched (``types._watch.watch``):
what lets caches of derived data skip re-reading a history that nobody edited."""

from __future__ import annotations

import gc

from treadle.types import AssistantMessage, TextContent, ToolCall, Usage, UserMessage, _watch


def test_only_watched_objects_count_assignments() -> None:
    message = UserMessage.of("hi")
    before = _watch.edit_count()
    message.content = [TextContent(text="unwatched")]
    assert _watch.edit_count() == before
    _watch.watch(message)
    message.content = [TextContent(text="watched")]
    assert _watch.edit_count() == before + 1
    block = message.content[0]
    block.text = "block, unwatched"
    assert _watch.edit_count() == before + 1
    _watch.watch(block)
    block.text = "block, watched"
    del block.text  # pydantic allows it on a model without validate_assignment
    assert _watch.edit_count() == before + 3


def test_every_history_type_is_watchable_but_usage_is_not_a_watched_model() -> None:
    for value in (
        UserMessage.of("x"),
        AssistantMessage(content=[ToolCall(id="c", name="t")]),
        TextContent(text="x"),
    ):
        assert isinstance(value, _watch.Watched)
    assert not isinstance(Usage(), _watch.Watched)  # never sent to a model: nothing derived


def test_watching_keeps_nothing_alive_and_a_reused_id_starts_unwatched() -> None:
    message = UserMessage.of("hi")
    _watch.watch(message)
    _watch.watch(message)  # twice: one entry
    key = id(message)
    assert key in _watch._watched
    del message
    gc.collect()
    assert key not in _watch._watched
    fresh = [UserMessage.of(str(i)) for i in range(200)]  # likely to reuse the address
    before = _watch.edit_count()
    for m in fresh:
        m.content = []
    assert _watch.edit_count() == before


def test_a_content_mark_sees_what_assignment_does_not() -> None:
    call = ToolCall(id="c", name="t", arguments={"a": [1]})
    reply = AssistantMessage(content=[TextContent(text="x"), call])
    mark = _watch.ContentMark(_watch.edit_count())
    assert mark.add(reply)
    assert mark.unchanged(_watch.edit_count())
    call.arguments["a"].append(2)  # inside a container: no assignment
    assert not mark.unchanged(_watch.edit_count())
    call.arguments["a"].pop()
    assert mark.unchanged(_watch.edit_count())
    reply.content.append(TextContent(text="y"))  # inside the content list
    assert not mark.unchanged(_watch.edit_count())
    reply.content.pop()
    reply.content[0] = TextContent(text="x")  # an equal block, but another object
    assert not mark.unchanged(_watch.edit_count())
    loose = _watch.ContentMark(_watch.edit_count(), containers=False)
    assert loose.add(reply)
    call.arguments["a"] = [3]  # not tracked without containers ...
    assert loose.unchanged(_watch.edit_count())
    call.arguments = {}  # ... but an assignment always is
    assert not loose.unchanged(_watch.edit_count())


def test_a_content_mark_refuses_models_it_cannot_watch() -> None:
    from pydantic import BaseModel

    class Note(BaseModel):
        content: list[str] = []

    mark = _watch.ContentMark(_watch.edit_count())
    assert not mark.add(Note())
    assert mark.lists == [] and mark.unchanged(_watch.edit_count())

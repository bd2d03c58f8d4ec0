"""Messages and blocks count attribute assignments once watched (``types._base.watch``):
what lets caches of derived data skip re-reading a history that nobody edited."""

from __future__ import annotations

import gc

from treadle.types import AssistantMessage, TextContent, ToolCall, Usage, UserMessage, _base


def test_only_watched_objects_count_assignments() -> None:
    message = UserMessage.of("hi")
    before = _base.edit_count()
    message.content = [TextContent(text="unwatched")]
    assert _base.edit_count() == before
    _base.watch(message)
    message.content = [TextContent(text="watched")]
    assert _base.edit_count() == before + 1
    block = message.content[0]
    block.text = "block, unwatched"
    assert _base.edit_count() == before + 1
    _base.watch(block)
    block.text = "block, watched"
    del block.text  # pydantic allows it on a model without validate_assignment
    assert _base.edit_count() == before + 3


def test_every_history_type_is_watchable_but_usage_is_not_a_watched_model() -> None:
    for value in (
        UserMessage.of("x"),
        AssistantMessage(content=[ToolCall(id="c", name="t")]),
        TextContent(text="x"),
    ):
        assert isinstance(value, _base.Watched)
    assert not isinstance(Usage(), _base.Watched)  # never sent to a model: nothing derived


def test_watching_keeps_nothing_alive_and_a_reused_id_starts_unwatched() -> None:
    message = UserMessage.of("hi")
    _base.watch(message)
    _base.watch(message)  # twice: one entry
    key = id(message)
    assert key in _base._watched
    del message
    gc.collect()
    assert key not in _base._watched
    fresh = [UserMessage.of(str(i)) for i in range(200)]  # likely to reuse the address
    before = _base.edit_count()
    for m in fresh:
        m.content = []
    assert _base.edit_count() == before

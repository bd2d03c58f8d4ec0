"""The hot path's unvalidated constructors give the same models as validated construction."""

from __future__ import annotations

from treadle.types import AssistantMessage, MessageUpdate, TextContent, TextDelta, ThinkingDelta
from treadle.types._base import replaced, trusted


def test_trusted_delta_equals_validated() -> None:
    for cls, kind in ((TextDelta, "text"), (ThinkingDelta, "thinking")):
        fast = trusted(cls, {"type": kind, "index": 2, "text": "hé"}, {"index", "text"})
        slow = cls(index=2, text="hé")
        assert type(fast) is cls
        assert fast == slow
        assert fast.model_fields_set == slow.model_fields_set
        assert fast.model_dump() == slow.model_dump()
        assert fast.model_dump_json(exclude_unset=True) == slow.model_dump_json(exclude_unset=True)


def test_replaced_is_a_new_model_and_leaves_the_old_one() -> None:
    block = TextContent(text="ab")
    longer = replaced(block, "text", "abc")
    assert longer == TextContent(text="abc") and block.text == "ab"
    assert longer.model_fields_set == block.model_fields_set
    longer.text = "x"  # validate_assignment off: plain set; the original's fields_set is apart
    assert block.text == "ab" and block.model_fields_set == {"text"}
    message = AssistantMessage(content=[block])
    snapshot = replaced(message, "content", list(message.content))
    message.content.append(TextContent(text="later"))
    assert len(snapshot.content) == 1
    update = MessageUpdate(
        seq=0,
        loop_id="l",
        depth=0,
        timestamp=1,
        message=snapshot,
        delta=TextDelta(index=0, text="ab"),
    )
    assert MessageUpdate.model_validate_json(update.model_dump_json()) == update


def test_fast_zero_usage_and_sums_equal_validated_ones() -> None:
    from treadle.types import Usage

    zero = Usage()
    assert zero == Usage.model_validate({}) and zero.model_fields_set == set()
    zero.input = 5  # a fresh object each time: the shared zero values are not shared state
    assert Usage().input == 0
    total = Usage(input=3, cost_usd=0.5) + Usage(output=2)
    expected = Usage(input=3, output=2, total_tokens=5, cost_usd=0.5)
    assert total == expected and total.model_dump() == expected.model_dump()


def test_the_fast_empty_reply_equals_a_validated_one() -> None:
    from treadle.loop._streaming import _empty_reply

    fast, slow = _empty_reply("m", "p"), AssistantMessage(model="m", provider="p")
    assert fast.model_dump(exclude={"timestamp"}) == slow.model_dump(exclude={"timestamp"})
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.content is not _empty_reply("m", "p").content

"""Request bodies built from per-message JSON kept between requests (``providers/_wire.py``):
the bytes equal a fresh encoding, and an edited, replaced or dropped message is never served
from the cache."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treadle import AgentContext, AgentLoopConfig, agent_loop
from treadle.providers import ModelRequest
from treadle.providers._wire import WireCache, splice
from treadle.providers.openai_chat import OpenAIChat
from treadle.testing.wire import WireFake
from treadle.tools import tool
from treadle.types import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

pytestmark = pytest.mark.anyio

IMAGE = ImageContent(data="aGVsbG8=", mime_type="image/png")


def history() -> list[AgentMessage]:
    return [
        UserMessage.of('What is 2 + 3? \u00e9 \u2028 "quoted"'),
        AssistantMessage(
            content=[
                ThinkingContent(thinking="add them"),
                TextContent(text="Let me add."),
                ToolCall(id="call 1", name="add", arguments={"a": 2, "b": [3, {"c": 4.5}]}),
            ],
            provider="openai",
            stop_reason="tool_use",
        ),
        ToolResultMessage(
            tool_call_id="call 1", tool_name="add", content=[TextContent(text="5"), IMAGE]
        ),
        AssistantMessage(content="It is 5.", provider="openai"),
    ]


def adapter(**options: Any) -> OpenAIChat:
    """An adapter whose cache keeps short histories too (these tests use short ones)."""
    provider = OpenAIChat("gpt-4o-mini", api_key="sk-test", **options)
    provider._wire.short = 0
    return provider


def fresh(provider: OpenAIChat, request: ModelRequest) -> bytes:
    """The body a new adapter (an empty cache) sends, encoded the way httpx does ``json=``."""
    body = type(provider)(
        provider.model,
        api_key="sk-test",
        provider_name=provider.name,
        reasoning_field=provider.reasoning_field,
    ).build_body(request)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def sent(provider: OpenAIChat, messages: list[AgentMessage]) -> list[dict[str, Any]]:
    request = ModelRequest(messages=messages, system_prompt="sys")
    body = provider.encode_body(request)
    assert body == fresh(provider, request)  # the cache never changes the bytes
    result: list[dict[str, Any]] = json.loads(body)["messages"]
    return result


def test_body_bytes_equal_a_fresh_encoding_every_time() -> None:
    provider = adapter()
    messages = history()
    first = sent(provider, messages)
    assert len(provider._wire) == len(messages)
    assert sent(provider, messages) == first
    assert [m["role"] for m in first] == [
        "system",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]


def test_a_short_history_is_encoded_afresh_and_kept_nowhere() -> None:
    """Under 8 messages the cache's bookkeeping costs more than encoding again."""
    provider = OpenAIChat("gpt-4o-mini", api_key="sk-test")  # the default threshold
    messages = history()
    assert len(messages) < 8
    first = sent(provider, messages)
    assert len(provider._wire) == 0 and not provider._wire._prefixes
    long = messages + history() + history()
    sent(provider, long)
    assert len(provider._wire) == len(long)  # from 8 on, each message is kept
    assert sent(provider, messages) == first


def test_an_edited_text_block_is_sent_as_edited() -> None:
    provider, messages = adapter(), history()
    sent(provider, messages)
    block = messages[3].content[0]
    assert isinstance(block, TextContent)
    block.text = "It is five."
    assert sent(provider, messages)[-1]["content"] == "It is five."


def test_blocks_appended_removed_or_replaced_are_seen() -> None:
    provider, messages = adapter(), history()
    sent(provider, messages)
    messages[0].content.append(TextContent(text="Show your work."))
    assert sent(provider, messages)[1]["content"][1] == {
        "type": "text",
        "text": "Show your work.",
    }
    messages[0].content.pop()
    assert sent(provider, messages)[1]["content"].startswith("What is 2 + 3?")
    messages[0].content[0] = TextContent(text="What is 4 + 4?")
    assert sent(provider, messages)[1]["content"] == "What is 4 + 4?"
    messages[0].content = [TextContent(text="Reassigned.")]
    assert sent(provider, messages)[1]["content"] == "Reassigned."


def test_an_edit_inside_tool_call_arguments_is_seen() -> None:
    provider, messages = adapter(), history()
    sent(provider, messages)
    call = messages[1].content[2]
    assert isinstance(call, ToolCall)
    call.arguments["b"][1]["c"] = 9  # nested, in place
    function = sent(provider, messages)[2]["tool_calls"][0]["function"]
    assert json.loads(function["arguments"]) == {"a": 2, "b": [3, {"c": 9}]}


def test_reassigned_message_fields_are_seen() -> None:
    provider, messages = adapter(), history()
    sent(provider, messages)
    result = messages[2]
    assert isinstance(result, ToolResultMessage)
    result.tool_call_id = "call_2"
    assert sent(provider, messages)[3]["tool_call_id"] == "call_2"
    result.content = [TextContent(text="6")]  # the images are gone too
    wire = sent(provider, messages)
    assert wire[3]["content"] == "6" and [m["role"] for m in wire][-1] == "assistant"


def test_a_replaced_message_is_encoded_and_the_old_one_released() -> None:
    provider, messages = adapter(), history()
    sent(provider, messages)
    messages[3] = AssistantMessage(content="Five.", provider="openai")
    gc.collect()
    assert sent(provider, messages)[-1]["content"] == "Five."
    assert len(provider._wire) == len(messages)  # the replaced message's entry went with it
    messages.clear()
    gc.collect()
    assert len(provider._wire) == 0  # the cache keeps no message alive


def test_adapter_settings_that_change_the_encoding_drop_the_cache() -> None:
    provider, messages = adapter(), history()
    messages[1].content[0] = ThinkingContent(thinking="add them")
    assert "reasoning_content" not in sent(provider, messages)[2]
    provider.reasoning_field = "reasoning_content"
    assert sent(provider, messages)[2]["reasoning_content"] == "add them"


def test_extra_body_keeps_its_place_and_may_replace_the_messages() -> None:
    provider, messages = adapter(), history()
    request = ModelRequest(messages=messages, extra_body={"model": "m2", "stream": False, "x": 1})
    body = json.loads(provider.encode_body(request))
    assert list(body)[:3] == ["model", "messages", "stream"]
    assert (body["model"], body["stream"], body["x"]) == ("m2", False, 1)
    own = [{"role": "user", "content": "mine"}]
    request = ModelRequest(messages=messages, extra_body={"messages": own})
    assert json.loads(provider.encode_body(request))["messages"] == own


def test_splice_orders_keys_and_handles_empty_parts() -> None:
    assert json.loads(splice({}, "m", [], {})) == {"m": []}
    assert json.loads(splice({"a": 1}, "m", [b"1", b"2"], {"z": 2})) == {
        "a": 1,
        "m": [1, 2],
        "z": 2,
    }
    assert list(json.loads(splice({"a": 1}, "m", [b"{}"], {}))) == ["a", "m"]


def test_objects_that_are_not_models_are_encoded_every_time() -> None:
    cache: WireCache[str] = WireCache()
    calls: list[object] = []

    def encode(value: object) -> str:
        calls.append(value)
        return "x"

    assert cache.encode_all([1, 2], encode) == ["x", "x"]
    assert cache.encode_all([1, 2], encode) == ["x", "x"]
    assert calls == [1, 2, 1, 2]


# ---- the loop: what a hook does to the history between turns reaches the next request ----


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def edit_sent_results(messages: list[AgentMessage]) -> list[AgentMessage]:
    """From the third request on, edit (in place) the tool results earlier requests sent."""
    if len(messages) < 5:
        return messages
    for message in messages:
        if isinstance(message, ToolResultMessage):
            block = message.content[0]
            if isinstance(block, TextContent) and not block.text.startswith("edited"):
                block.text = f"edited: {block.text}"
    return messages


def replace_first_prompt(messages: list[AgentMessage]) -> list[AgentMessage]:
    return [UserMessage.of("replaced prompt"), *messages[1:]]


async def test_in_place_edits_by_transform_context_reach_the_next_request() -> None:
    call = AssistantMessage(
        content=[ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})], stop_reason="tool_use"
    )
    fake = WireFake.openai([call, "five", "again"])
    config = AgentLoopConfig(
        provider=fake.provider(api_key="k"), transform_context=edit_sent_results
    )
    context = AgentContext(tools=[add])
    await agent_loop("add 2 and 3", context, config)
    await agent_loop("once more", context, config)  # the same adapter, a warm cache
    tool_messages = [
        [m["content"] for m in request.json["messages"] if m["role"] == "tool"]
        for request in fake.requests
    ]
    assert tool_messages == [[], ["5"], ["edited: 5"]]


async def test_messages_replaced_by_transform_context_reach_the_request() -> None:
    fake = WireFake.openai(["one", "two"])
    provider = fake.provider(api_key="k")
    context = AgentContext()
    await agent_loop("first prompt", context, AgentLoopConfig(provider=provider))
    config = AgentLoopConfig(provider=provider, transform_context=replace_first_prompt)
    await agent_loop("second prompt", context, config)
    users = [m["content"] for m in fake.requests[1].json["messages"] if m["role"] == "user"]
    assert users == ["replaced prompt", "second prompt"]


async def test_a_history_edited_in_place_between_runs_is_sent_as_edited() -> None:
    fake = WireFake.openai(["one", "two", "three"])
    config = AgentLoopConfig(provider=fake.provider(api_key="k"))
    context = AgentContext()
    await agent_loop("first prompt", context, config)
    await agent_loop("second prompt", context, config)  # sends the reply "one"
    reply = context.messages[1]
    assert isinstance(reply, AssistantMessage)
    reply.content = [TextContent(text="an answer, rewritten")]
    prompt = context.messages[0]
    assert isinstance(prompt, UserMessage)
    prompt.content[0] = TextContent(text="first prompt, rewritten")
    await agent_loop("third prompt", context, config)
    sent = [(m["role"], m["content"]) for m in fake.requests[2].json["messages"]][:2]
    assert sent == [("user", "first prompt, rewritten"), ("assistant", "an answer, rewritten")]


# ---- the prefix check: many requests in a row, any edit between them ----

EDITS = [
    "append_message",
    "set_text",
    "append_block",
    "replace_block",
    "pop_block",
    "edit_arguments",
    "replace_arguments",
    "replace_message",
    "copy_message",
    "set_field",
    "drop_first",
    "none",
]


def edit(messages: list[AgentMessage], op: str, i: int) -> None:
    """One kind of change someone may make to a history between two requests."""
    n = len(messages)
    target = messages[i % n]
    calls = [b for m in messages for b in m.content if isinstance(b, ToolCall)]
    texts = [b for m in messages for b in m.content if isinstance(b, TextContent)]
    if op == "append_message":
        messages.append(UserMessage.of(f"more {i}"))
    elif op == "set_text" and texts:
        texts[i % len(texts)].text = f"edited {i}"
    elif op == "append_block" and isinstance(target, UserMessage):
        target.content.append(TextContent(text=f"appended {i}"))
    elif op == "replace_block" and target.content:
        block = target.content[0]
        if isinstance(block, TextContent):
            target.content[0] = TextContent(text=f"replaced {i}")
    elif op == "pop_block" and len(target.content) > 1:
        target.content.pop()
    elif op == "edit_arguments" and calls:
        calls[i % len(calls)].arguments["a"] = i
    elif op == "replace_arguments" and calls:
        calls[i % len(calls)].arguments = {"a": i}
    elif op == "replace_message":
        messages[i % n] = UserMessage.of(f"instead {i}")
    elif op == "copy_message" and isinstance(target, AssistantMessage):
        # shares the content list with the original: only the message object differs
        messages[i % n] = target.model_copy(update={"provider": "other"})
    elif op == "set_field" and isinstance(target, ToolResultMessage):
        target.tool_call_id = f"id {i}"
    elif op == "drop_first" and n > 1:
        del messages[0]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(EDITS), st.integers(0, 50)), max_size=12))
def test_every_request_equals_a_fresh_encoding_whatever_changed(
    steps: list[tuple[str, int]],
) -> None:
    provider = adapter(reasoning_field="reasoning_content")
    messages = history()
    sent(provider, messages)
    for op, i in steps:
        edit(messages, op, i)
        sent(provider, messages)  # asserts the bytes equal a fresh adapter's
        sent(provider, messages)  # and again, from the prefix just checked


def test_two_histories_on_one_adapter_each_keep_their_prefix() -> None:
    provider = adapter()
    one, two = history(), history()
    for _ in range(3):
        sent(provider, one)
        sent(provider, two)
    one[0].content[0] = TextContent(text="only the first history changed")
    assert sent(provider, one)[1]["content"] == "only the first history changed"
    assert sent(provider, two)[1]["content"].startswith("What is 2 + 3?")


def test_a_history_that_is_gone_leaves_nothing_behind() -> None:
    provider = adapter()
    messages = history()
    sent(provider, messages)
    sent(provider, messages)
    assert provider._wire._prefixes
    del messages
    gc.collect()
    assert not provider._wire._prefixes and len(provider._wire) == 0


def test_the_tools_list_is_encoded_once_and_again_when_a_schema_changes() -> None:
    from treadle.tools import tool_spec

    @tool
    def lookup(city: str, days: int = 1) -> str:
        """Look up the weather."""
        return city

    provider = adapter()
    messages = history()
    spec = tool_spec(lookup)
    assert tool_spec(lookup) is spec  # an unchanged tool: the same spec, run after run
    request = ModelRequest(messages=messages, tools=[spec, tool_spec(add)], tool_choice="auto")
    body = json.loads(provider.encode_body(request))
    assert [t["function"]["name"] for t in body["tools"]] == ["lookup", "add"]
    assert list(body)[-1] == "tools" and body["tool_choice"] == "auto"
    kept = provider._tools._encoded
    assert json.loads(provider.encode_body(request))["tools"] == body["tools"]
    assert provider._tools._encoded is kept  # not encoded again
    spec.parameters["properties"]["days"]["maximum"] = 14  # an edit in place is seen
    tools = json.loads(provider.encode_body(request))["tools"]
    assert tools[0]["function"]["parameters"]["properties"]["days"]["maximum"] == 14
    lookup.parameters["required"] = ["city", "days"]  # the tool's own schema, in place
    assert tool_spec(lookup) is not spec and tool_spec(lookup).parameters["required"] == [
        "city",
        "days",
    ]
    spec = tool_spec(lookup)
    lookup.description = "Look up the forecast."  # a changed tool gets a new spec
    assert tool_spec(lookup) is not spec
    request = ModelRequest(messages=messages, tools=[tool_spec(lookup)])
    assert json.loads(provider.encode_body(request))["tools"][0]["function"]["description"] == (
        "Look up the forecast."
    )
    own = {"tools": [{"type": "function", "function": {"name": "x", "parameters": {}}}]}
    request = ModelRequest(messages=messages, tools=[spec], extra_body=own)
    assert json.loads(provider.encode_body(request))["tools"] == own["tools"]

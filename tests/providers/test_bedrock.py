"""The Bedrock adapter's own mapping: request bodies (tools, images, reasoning per model
family, cache points), the stream (reasoning, redacted reasoning, stop reasons), Bedrock's
errors in headers and exception frames mid-stream, and the whole Converse response."""

from __future__ import annotations

from typing import Any

import pytest
from tests.providers.aws_env import MODEL
from tests.testing.wire_cases import collect

from treadle import AgentContext, AgentLoopConfig, agent_loop
from treadle.loop import RetryPolicy
from treadle.providers import Bedrock, ModelRequest, ProviderError
from treadle.testing import Fail, Raw, WireFake
from treadle.testing.formats.bedrock import exception_frame, frame
from treadle.types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

pytestmark = pytest.mark.anyio
NOVA, GPT_OSS = "us.amazon.nova-pro-v1:0", "openai.gpt-oss-120b-1:0"
LLAMA = "meta.llama3-70b-instruct-v1:0"
WEATHER = ToolSpec(name="weather", description="The weather.", parameters={"type": "object"})
CALL = ToolCall(id="tooluse_1", name="weather", arguments={"city": "Paris"})
STREAM = {"content-type": "application/vnd.amazon.eventstream"}


def body(request: ModelRequest, model: str = MODEL, **options: Any) -> dict[str, Any]:
    return Bedrock(model, api_key="k", region="us-east-1", **options).build_body(request)


def ask(text: str = "hi", **fields: Any) -> ModelRequest:
    return ModelRequest(messages=[UserMessage.of(text)], prompt_cache="off", **fields)


def test_settings_tools_and_images_in_converse_shape() -> None:
    png = ImageContent(data="iVBORw0KGgo=", mime_type="image/png")
    request = ModelRequest(
        system_prompt="Be brief.",
        messages=[
            UserMessage(content=[TextContent(text="What is this?"), png]),
            AssistantMessage(content=[TextContent(text="Checking."), CALL], provider="bedrock"),
            ToolResultMessage(
                tool_call_id=CALL.id, tool_name="weather", content="21 C", is_error=True
            ),
            UserMessage.of("And tomorrow?"),
        ],
        tools=[WEATHER],
        tool_choice="required",
        max_tokens=300,
        temperature=0.2,
        top_p=0.9,
        stop="END",
        prompt_cache="off",
    )
    sent = body(request)
    assert sent["system"] == [{"text": "Be brief."}]
    assert sent["inferenceConfig"] == {"temperature": 0.2, "topP": 0.9, "maxTokens": 300,
                                       "stopSequences": ["END"]}  # fmt: skip
    assert sent["toolConfig"] == {
        "tools": [{"toolSpec": {"name": "weather", "description": "The weather.",
                                "inputSchema": {"json": {"type": "object"}}}}],
        "toolChoice": {"any": {}},
    }  # fmt: skip
    user, assistant, results = sent["messages"]
    assert user["content"][1] == {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}}
    assert assistant["content"][1] == {"toolUse": {"toolUseId": "tooluse_1", "name": "weather",
                                                   "input": {"city": "Paris"}}}  # fmt: skip
    assert results["content"] == [
        {
            "toolResult": {
                "toolUseId": "tooluse_1",
                "content": [{"text": "21 C"}],
                "status": "error",
            }
        },
        {"text": "And tomorrow?"},
    ]  # results first, the user's words after, in one turn
    assert "model" not in sent  # the model goes in the URL


@pytest.mark.parametrize(
    ("choice", "wire"),
    [("auto", {"auto": {}}), ({"name": "weather"}, {"tool": {"name": "weather"}}), ("none", None)],
)
def test_tool_choice(choice: Any, wire: Any) -> None:
    config = body(ask(tools=[WEATHER], tool_choice=choice))["toolConfig"]
    assert config.get("toolChoice") == wire and len(config["tools"]) == 1  # "none": still offered


def test_tools_the_history_used_are_declared_when_no_longer_offered() -> None:
    request = ModelRequest(
        messages=[UserMessage.of("hi"), AssistantMessage(content=[CALL]),
                  ToolResultMessage(tool_call_id=CALL.id, tool_name="weather", content="sun")],
        prompt_cache="off",
    )  # fmt: skip
    (tool,) = body(request)["toolConfig"]["tools"]  # Bedrock refuses tool blocks without it
    assert tool["toolSpec"]["name"] == "weather" and "toolChoice" not in body(request)["toolConfig"]
    assert "toolConfig" not in body(ask())


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        (MODEL, {"thinking": {"type": "enabled", "budget_tokens": 8192}}),
        (NOVA, {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": "medium"}}),
        (GPT_OSS, {"reasoning_effort": "medium"}),
        (LLAMA, None),
    ],
)
def test_reasoning_per_model_family(model: str, fields: Any) -> None:
    sent = body(ask(thinking_level="medium", temperature=0.5), model)
    assert sent.get("additionalModelRequestFields") == fields
    if model == MODEL:  # Claude: room above the budget, and no temperature while thinking
        assert sent["inferenceConfig"] == {"maxTokens": 8192 + 8192}
    else:
        assert sent["inferenceConfig"]["temperature"] == 0.5
    assert "additionalModelRequestFields" not in body(ask(), model)  # off: nothing sent
    opaque = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"
    assert (
        "thinking"
        in body(ask(thinking_level="low"), opaque, family="anthropic")[
            "additionalModelRequestFields"
        ]
    )


def test_claude_thinking_is_left_out_where_claude_refuses_it() -> None:
    forced = ask(thinking_level="high", tools=[WEATHER], tool_choice={"name": "weather"})
    assert "additionalModelRequestFields" not in body(forced)
    midway = ModelRequest(  # a tool turn in progress that did not open with reasoning
        messages=[UserMessage.of("hi"), AssistantMessage(content=[CALL], provider="bedrock"),
                  ToolResultMessage(tool_call_id=CALL.id, tool_name="weather", content="sun")],
        tools=[WEATHER], thinking_level="high", prompt_cache="short",
    )  # fmt: skip
    assert "additionalModelRequestFields" not in body(midway)


def test_reasoning_goes_back_signed_to_bedrock_and_as_text_elsewhere() -> None:
    signed = ThinkingContent(thinking="Think.", signature="sig==")
    hidden = ThinkingContent(thinking="", signature="cmVkYWN0ZWQ=", redacted=True)
    mine = AssistantMessage(content=[signed, hidden, TextContent(text="Hi")], provider="bedrock")
    other = mine.model_copy(update={"provider": "anthropic"})
    for message, want in [
        (mine, [{"reasoningContent": {"reasoningText": {"text": "Think.", "signature": "sig=="}}},
                {"reasoningContent": {"redactedContent": "cmVkYWN0ZWQ="}}, {"text": "Hi"}]),
        (other, [{"text": "<thinking>\nThink.\n</thinking>"}, {"text": "Hi"}]),
    ]:  # fmt: skip
        request = ModelRequest(messages=[UserMessage.of("q"), message], prompt_cache="off")
        assert body(request)["messages"][1]["content"] == want


def test_structured_output_as_output_config() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    sent = body(ask(response_format={"name": "count", "schema": schema}))
    definition = sent["outputConfig"]["textFormat"]["structure"]["jsonSchema"]
    assert definition["name"] == "count"
    assert definition["schema"] == '{"type":"object","properties":{"n":{"type":"integer"}}}'


def test_cache_points_automatic_explicit_and_at_most_four() -> None:
    tools = [WEATHER.model_copy(update={"name": "a", "cache_point": True}), WEATHER]
    history = [
        UserMessage(content="An early document", cache_point=True),
        AssistantMessage(content="Read.", cache_point=True),
        UserMessage(content="A second document", cache_point=True),
        AssistantMessage(content="Read too."),
        UserMessage.of("Question?"),
    ]
    long = {"cachePoint": {"type": "default", "ttl": "1h"}}
    request = ModelRequest(system_prompt="S", messages=history, tools=tools, prompt_cache="long")
    sent = body(request)
    assert sent["system"] == [{"text": "S"}, long]
    assert sent["toolConfig"]["tools"][-1] == long  # the end of the tools
    assert sent["messages"][-1]["content"] == [{"text": "Question?"}, long]
    points = [b for turn in sent["messages"] for b in turn["content"] if "cachePoint" in b]
    tool_points = [t for t in sent["toolConfig"]["tools"] if "cachePoint" in t]
    # three automatic, then one explicit: the latest in the prompt (the second document)
    assert len(points) + len(tool_points) + 1 == 4
    assert sent["messages"][2]["content"] == [{"text": "A second document"}, long]
    assert [b for b in sent["messages"][0]["content"] if "cachePoint" in b] == []
    short = body(request.model_copy(update={"prompt_cache": "short"}))
    assert short["system"][-1] == {"cachePoint": {"type": "default"}}
    off = body(request.model_copy(update={"prompt_cache": "off"}))
    assert "cachePoint" not in str(off)
    assert "cachePoint" not in str(body(request, LLAMA))  # a family without prompt caching
    nova = body(request, NOVA)  # Nova: the system prompt and messages, no ttl, no tools
    assert nova["system"][-1] == {"cachePoint": {"type": "default"}}
    assert "cachePoint" not in str(nova["toolConfig"])


def test_a_cache_point_stays_after_the_tool_result_it_marks() -> None:
    result = ToolResultMessage(tool_call_id=CALL.id, tool_name="weather", content="sun",
                               cache_point=True)  # fmt: skip
    messages = [UserMessage.of("q"), AssistantMessage(content=[CALL]), result, UserMessage.of("ok")]
    request = ModelRequest(messages=messages, tools=[WEATHER])
    turn = body(request)["messages"][-1]["content"]
    assert [next(iter(b)) for b in turn] == ["toolResult", "cachePoint", "text", "cachePoint"]


async def test_stream_usage_with_cache_details_and_long_writes() -> None:
    metadata = {"usage": {"inputTokens": 10, "outputTokens": 5, "cacheReadInputTokens": 100,
                          "cacheWriteInputTokens": 50, "totalTokens": 165,
                          "cacheDetails": [{"ttl": "1h", "inputTokens": 30},
                                           {"ttl": "5m", "inputTokens": 20}]}}  # fmt: skip
    frames = [
        frame("messageStart", {"role": "assistant"}),
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}}),
        frame("contentBlockStop", {"contentBlockIndex": 0}),
        frame("messageStop", {"stopReason": "end_turn"}),
        frame("metadata", metadata),
    ]
    _, message = await collect(WireFake.bedrock([Raw(frames, headers=STREAM)]).provider())
    usage = message.usage
    assert (usage.input, usage.cache_read, usage.cache_write) == (10, 100, 50)
    assert usage.cache_write_long == 30
    assert (usage.output, usage.total_tokens, message.text) == (5, 165, "Hi")


async def test_redacted_reasoning_and_a_signature_from_the_stream() -> None:
    frames = [
        frame("messageStart", {"role": "assistant"}),
        frame("contentBlockDelta", {"contentBlockIndex": 0,
                                    "delta": {"reasoningContent": {"text": "Hmm."}}}),
        frame("contentBlockDelta", {"contentBlockIndex": 0,
                                    "delta": {"reasoningContent": {"signature": "c2ln"}}}),
        frame("contentBlockStop", {"contentBlockIndex": 0}),
        frame("contentBlockDelta", {"contentBlockIndex": 1,
                                    "delta": {"reasoningContent": {"redactedContent": "aGlk"}}}),
        frame("contentBlockStop", {"contentBlockIndex": 1}),
        frame("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"text": "Done"}}),
        frame("contentBlockStop", {"contentBlockIndex": 2}),
        frame("messageStop", {"stopReason": "end_turn"}),
    ]  # fmt: skip
    _, message = await collect(WireFake.bedrock([Raw(frames, headers=STREAM)]).provider())
    assert message.content == [
        ThinkingContent(thinking="Hmm.", signature="c2ln"),
        ThinkingContent(thinking="", signature="aGlk", redacted=True),
        TextContent(text="Done"),
    ]


@pytest.mark.parametrize(
    ("reason", "stop", "kind"),
    [("guardrail_intervened", "error", "content_filter"),
     ("content_filtered", "error", "content_filter"),
     ("malformed_tool_use", "error", "model_error"), ("max_tokens", "length", None),
     ("model_context_window_exceeded", "length", None), ("stop_sequence", "stop", None)],
)  # fmt: skip
async def test_stop_reasons(reason: str, stop: str, kind: str | None) -> None:
    frames = [
        frame("messageStart", {"role": "assistant"}),
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Sorry."}}),
        frame("messageStop", {"stopReason": reason}),
    ]
    _, message = await collect(WireFake.bedrock([Raw(frames, headers=STREAM)]).provider())
    assert message.stop_reason == stop and message.text == "Sorry."
    assert (message.error.kind if message.error else None) == kind


@pytest.mark.parametrize(
    ("name", "text", "kind"),
    [
        ("throttlingException", "Too many tokens, please wait before trying again.", "rate_limit"),
        ("validationException", "The model returned the following errors: Input Tokens "
         "Exceeded: Number of input tokens exceeds maximum length.", "context_overflow"),
        ("modelStreamErrorException", "The model failed while streaming.", "server"),
        ("serviceUnavailableException", "Service is unavailable.", "overloaded"),
        ("internalServerException", "Internal failure.", "server"),
        ("validationException", "A malformed tool result.", "bad_request"),
    ],
)  # fmt: skip
@pytest.mark.one_backend  # decoding recorded bytes: the backend cannot matter
async def test_exception_frames_mid_stream(name: str, text: str, kind: str) -> None:
    frames = [
        frame("messageStart", {"role": "assistant"}),
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Part"}}),
        exception_frame(name, text),
    ]
    with pytest.raises(ProviderError) as failed:
        await collect(WireFake.bedrock([Raw(frames, headers=STREAM)]).provider())
    assert failed.value.kind == kind and text in failed.value.message
    assert failed.value.message.startswith(name[0].upper() + name[1:])


@pytest.mark.parametrize(
    ("status", "name", "kind"),
    [(429, "ThrottlingException", "rate_limit"), (429, "ModelNotReadyException", "overloaded"),
     (503, "ServiceUnavailableException", "overloaded"), (403, "AccessDeniedException", "auth"),
     (408, "ModelTimeoutException", "timeout"), (424, "ModelErrorException", "server"),
     (404, "ResourceNotFoundException", "bad_request")],
)  # fmt: skip
@pytest.mark.one_backend  # parsing recorded bytes: the backend cannot matter
async def test_http_errors_by_the_exception_bedrock_names(
    status: int, name: str, kind: str
) -> None:
    headers = {"x-amzn-errortype": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
    fake = WireFake.bedrock([Fail(status, body={"message": "It failed."}, headers=headers)])
    with pytest.raises(ProviderError) as failed:
        await collect(fake.provider())
    assert (failed.value.kind, failed.value.status_code) == (kind, status)
    assert failed.value.message == f"{name}: It failed."


async def test_throttling_is_retried_then_answered() -> None:
    fake = WireFake.bedrock([Fail(429), "Fine now."])
    config = AgentLoopConfig(provider=fake.provider(), retry=RetryPolicy(initial_delay_s=0.001))
    new = await agent_loop("hi", AgentContext(), config)
    assert new[-1].text == "Fine now." and len(fake.requests) == 2  # type: ignore[union-attr]


async def test_converse_without_streaming_and_the_model_in_the_url() -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-x-v1:0"
    fake = WireFake.bedrock([AssistantMessage(content=[TextContent(text="Whole."), CALL])])
    provider = fake.provider(arn, stream=False)
    _, message = await collect(provider)
    assert message.content == [TextContent(text="Whole."), CALL]
    assert message.stop_reason == "tool_use" and message.model == arn
    sent = fake.requests[0]
    quoted = "arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic"
    assert sent.url.endswith(f"/model/{quoted}.claude-x-v1%3A0/converse")


def test_a_model_string_given_to_the_adapter_is_refused() -> None:
    with pytest.raises(Exception, match=r"Bedrock\('anthropic"):
        Bedrock(f"bedrock:{MODEL}", api_key="k", region="us-east-1")
    assert repr(Bedrock(MODEL, api_key="SECRET-KEY-123", region="eu-west-1")) == (
        f"Bedrock(model='{MODEL}', base_url='https://bedrock-runtime.eu-west-1.amazonaws.com', "
        "region='eu-west-1')"
    )

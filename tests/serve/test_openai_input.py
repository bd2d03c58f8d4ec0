"""What an OpenAI client sends, read as treadle's history: each mistake is a 4xx saying what
was wrong, never a 500; what is well formed becomes the history the model reads."""

from __future__ import annotations

import base64

import pytest

from treadle.types import AssistantMessage, ImageContent, ToolResultMessage, UserMessage
from treadle.ui import RequestError
from treadle.ui._openai_input import (
    ResponsesInput,
    chat_tools,
    messages_from_chat,
    model_settings,
    responses_tools,
)

PNG = base64.b64encode(b"\x89PNG fake").decode()


def test_chat_messages_become_the_history() -> None:
    history, system = messages_from_chat(
        [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "look", "arguments": '{"at": "it"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "a cat"}]},
        ]
    )
    assert system == "Be brief."
    user, assistant, result = history
    assert isinstance(user, UserMessage) and user.text == "What is this?"
    assert isinstance(user.content[1], ImageContent) and user.content[1].mime_type == "image/png"
    assert isinstance(assistant, AssistantMessage)
    assert assistant.tool_calls[0].arguments == {"at": "it"}
    assert isinstance(result, ToolResultMessage)
    assert (result.tool_name, result.text) == ("look", "a cat")


@pytest.mark.parametrize(
    ("messages", "says"),
    [
        ([], "messages must be a non-empty list"),
        ([{"role": "robot", "content": "x"}], "role 'robot'"),
        ([{"role": "user", "content": 3}], "content must be a string or a list"),
        (
            [{"role": "user", "content": [{"type": "input_audio"}]}],
            "'input_audio' are not supported",
        ),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": "http://x/a.png"}]}],
            "must be a data: URL",
        ),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{"}}],
                }
            ],
            "arguments: the request body is not JSON",
        ),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1]"}}],
                }
            ],
            "arguments must be a JSON object",
        ),
        ([{"role": "tool", "content": "x"}], "tool_call_id must be a non-empty string"),
    ],
)
def test_chat_mistakes_are_400s(messages: object, says: str) -> None:
    with pytest.raises(RequestError, match=says) as raised:
        messages_from_chat(messages)
    assert raised.value.status == 400


def test_tools_and_settings() -> None:
    (tool,) = chat_tools([{"type": "function", "function": {"name": "f", "parameters": {}}}])
    assert tool.name == "f"
    (tool,) = responses_tools([{"type": "function", "name": "g"}])
    assert tool.name == "g"
    with pytest.raises(RequestError, match="tools of type 'web_search'"):
        responses_tools([{"type": "web_search"}])
    settings = model_settings(
        {"temperature": 0.5, "max_output_tokens": 10}, max_tokens=("max_output_tokens",)
    )
    assert settings == {"temperature": 0.5, "max_tokens": 10}
    with pytest.raises(RequestError, match="invalid sampling settings: top_p"):
        model_settings({"top_p": 3}, max_tokens=())


def test_responses_items_become_the_history() -> None:
    read = ResponsesInput({}).read(
        [
            {"role": "user", "content": "weather?"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Looking."}],
            },
            {
                "type": "mcp_call",
                "id": "c1",
                "name": "weather",
                "arguments": '{"city": "Oslo"}',
                "output": "sunny",
                "server_label": "a",
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Sunny."}],
            },
            {"type": "function_call", "call_id": "c2", "name": "pick", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c2", "output": "red"},
            {"type": "reasoning", "summary": []},
        ]
    )
    kinds = [type(m).__name__ for m in read.history]
    assert kinds == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "AssistantMessage",
        "ToolResultMessage",
    ]
    first, result = read.history[1], read.history[2]
    assert isinstance(first, AssistantMessage) and first.text == "Looking."
    assert first.tool_calls[0].name == "weather"
    assert isinstance(result, ToolResultMessage) and result.text == "sunny"
    with pytest.raises(RequestError, match="'item_reference' are not supported"):
        ResponsesInput({}).read([{"type": "item_reference", "id": "x"}])
    with pytest.raises(RequestError, match="approve must be true or false"):
        ResponsesInput({}).read(
            [{"type": "mcp_approval_response", "approval_request_id": "x", "approve": "yes"}]
        )

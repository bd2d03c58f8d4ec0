"""Context-overflow errors as the servers people run send them (their documented error
bodies, through each adapter's wire format): every one is ``context_overflow``, so a loop
with compaction compacts and retries instead of failing the turn."""

from __future__ import annotations

from typing import Any

import pytest

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AgentMessage,
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    agent_loop,
)
from treadle.context import CompactionPolicy
from treadle.context.calibration import overflow_sizes
from treadle.providers import ModelRequest, ProviderError
from treadle.testing import Fail, RecordedRequest, WireFake

pytestmark = pytest.mark.anyio

LLAMA_CPP = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size. try increasing the "
        "context size or enable context shift",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 14429,
        "n_ctx": 8192,
    }
}
LLAMA_CPP_COUNTED = {
    "error": {
        "code": 400,
        "message": "request (4476 tokens) exceeds the available context size (4096 tokens)",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 4476,
        "n_ctx": 4096,
    }
}
VLLM = {
    "object": "error",
    "message": "This model's maximum context length is 4096 tokens. However, you requested "
    "5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length "
    "of the messages or completion.",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}
VLLM_DECODER = {
    "error": {
        "message": "The decoder prompt (length 17772) is longer than the maximum model length "
        "of 16384. Make sure that `max_model_len` is no smaller than the number of text tokens.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
}
OLLAMA = {"error": "the input length exceeds the context length"}
LM_STUDIO = {
    "error": "Trying to keep the first 15857 tokens when context the overflows. However, the "
    "model is loaded with context length of only 4096 tokens, which is not enough. Try to "
    "load the model with a larger context length, or provide a shorter input"
}
LM_STUDIO_KEEP = {
    "error": "The number of tokens to keep from the initial prompt is greater than the context "
    "length. Try to load the model with a larger context length, or provide a shorter input"
}
OPENAI = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens. However, your "
        "messages resulted in 130415 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
OPENAI_RESPONSES = {
    "error": {
        "message": "Your input exceeds the context window of this model. Please adjust your "
        "input and try again.",
        "type": "invalid_request_error",
        "param": "input",
        "code": "context_length_exceeded",
    }
}
ANTHROPIC = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 208310 tokens > 200000 maximum",
    },
}
ANTHROPIC_LIMIT = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "input length and `max_tokens` exceed context limit: 197865 + 21333 > "
        "200000, decrease input length or `max_tokens` and try again",
    },
}
GEMINI = {
    "error": {
        "code": 400,
        "message": "The input token count (1234567) exceeds the maximum number of tokens "
        "allowed (1048576).",
        "status": "INVALID_ARGUMENT",
    }
}

# AWS Bedrock: a ValidationException (its name in x-amzn-ErrorType, the message in the body),
# as Bedrock words it for Claude and as its SDK users report it.
BEDROCK = {
    "message": "The model returned the following errors: Input is too long for requested model."
}
BEDROCK_LIMIT = {
    "message": "input length and `max_tokens` exceed context limit: 142422 + 64000 > 204658, "
    "decrease input length or `max_tokens` and try again"
}
BEDROCK_BYTES = {"message": "too many total text bytes"}
BEDROCK_NOVA = {
    "message": "The model returned the following errors: Input Tokens Exceeded: Number of input "
    "tokens exceeds maximum length. Please update the input to try again."
}

SUMMARISER = b"You condense the earlier part of a conversation"  # the summary call's prompt

CASES = [
    pytest.param("openai", 400, LLAMA_CPP, id="llama.cpp"),
    pytest.param("openai", 400, LLAMA_CPP_COUNTED, id="llama.cpp-counted"),
    pytest.param("openai", 500, LLAMA_CPP, id="llama.cpp-as-500"),
    pytest.param("openai", 400, VLLM, id="vllm"),
    pytest.param("openai", 400, VLLM_DECODER, id="vllm-decoder"),
    pytest.param("ollama", 400, OLLAMA, id="ollama"),
    pytest.param("openai", 400, OLLAMA, id="ollama-v1"),
    pytest.param("openai", 400, LM_STUDIO, id="lm-studio"),
    pytest.param("openai", 400, LM_STUDIO_KEEP, id="lm-studio-keep"),
    pytest.param("openai", 400, OPENAI, id="openai"),
    pytest.param("responses", 400, OPENAI_RESPONSES, id="openai-responses"),
    pytest.param("anthropic", 400, ANTHROPIC, id="anthropic"),
    pytest.param("anthropic", 400, ANTHROPIC_LIMIT, id="anthropic-limit"),
    pytest.param("gemini", 400, GEMINI, id="gemini"),
    pytest.param("bedrock", 400, BEDROCK, id="bedrock"),
    pytest.param("bedrock", 400, BEDROCK_LIMIT, id="bedrock-limit"),
    pytest.param("bedrock", 400, BEDROCK_BYTES, id="bedrock-bytes"),
    pytest.param("bedrock", 400, BEDROCK_NOVA, id="bedrock-nova"),
]


def _history(turns: int = 30) -> list[AgentMessage]:
    history: list[AgentMessage] = [UserMessage.of("Read the files.")]
    for n in range(turns):
        history.append(
            AssistantMessage(content=[ToolCall(id=f"h{n}", name="read", arguments={"n": n})])
        )
        history.append(ToolResultMessage(tool_call_id=f"h{n}", tool_name="read", content="x" * 40))
    history.append(AssistantMessage(content="Done reading."))
    return history


@pytest.mark.parametrize(("fmt", "status", "body"), CASES)
@pytest.mark.one_backend  # parsing an error body: the backend cannot matter
async def test_the_overflow_is_classified(fmt: str, status: int, body: dict[str, Any]) -> None:
    fake = WireFake(fmt, [Fail(status, body=body)])
    provider = fake.provider(api_key="k")
    with pytest.raises(ProviderError) as failed:
        async for _ in provider.stream(ModelRequest(messages=[UserMessage.of("hi")])):
            pass
    assert failed.value.kind == "context_overflow", failed.value


@pytest.mark.parametrize(("fmt", "status", "body"), CASES)
async def test_compaction_recovers_and_retries(fmt: str, status: int, body: dict[str, Any]) -> None:
    def answer(request: RecordedRequest) -> str:
        if SUMMARISER in request.body:
            return "The user asked for many files to be read; all reads succeeded."
        return "Here is the answer."

    # The sizes these bodies name are larger than this history: calibration believes them
    # (the window, a ratio up to its cap), so the summary may take more than one call.
    fake = WireFake(fmt, [Fail(status, body=body)], default=answer)
    context = AgentContext(messages=_history())
    policy = CompactionPolicy(context_window=100_000, tokenizer=None)
    config = AgentLoopConfig(provider=fake.provider(api_key="k"), compaction=policy)
    new = await agent_loop("And now?", context, config)
    assert isinstance(new[-1], AssistantMessage)
    assert new[-1].error is None and new[-1].text == "Here is the answer."
    # the failed call, the summary call(s), then the retry with a shorter history
    failed, *summaries, retried = fake.requests
    assert summaries and all(SUMMARISER in r.body for r in summaries)
    assert len(retried.body) < len(failed.body)


@pytest.mark.parametrize(
    "message",
    [
        "Invalid value for 'temperature': must be between 0 and 2.",
        "messages: roles must alternate between user and assistant",
        "model 'llama3' not found, try pulling it first",
    ],
)
async def test_other_bad_requests_are_not_overflows(message: str) -> None:
    fake = WireFake("openai", [Fail(400, message=message)])
    provider = fake.provider(api_key="k")
    with pytest.raises(ProviderError) as failed:
        async for _ in provider.stream(ModelRequest(messages=[UserMessage.of("hi")])):
            pass
    assert failed.value.kind == "bad_request"


SIZES = {
    "llama.cpp": (14429, 8192),  # from the body's n_prompt_tokens / n_ctx
    "llama.cpp-counted": (4476, 4096),
    "llama.cpp-as-500": (14429, 8192),
    "vllm": (4000, 3096),  # the messages' tokens; the window less the completion's room
    "vllm-decoder": (17772, 16384),
    "ollama": (None, None),
    "ollama-v1": (None, None),
    "lm-studio": (15857, 4096),
    "lm-studio-keep": (None, None),
    "openai": (130415, 128000),
    "openai-responses": (None, None),
    "anthropic": (208310, 200000),
    "anthropic-limit": (197865, 200000 - 21333),
    "gemini": (1234567, 1048576),
    "bedrock": (None, None),
    "bedrock-limit": (142422, 204658 - 64000),
    "bedrock-bytes": (None, None),
    "bedrock-nova": (None, None),
}


@pytest.mark.parametrize(
    ("fmt", "status", "body", "sizes"),
    [pytest.param(*case.values, SIZES[str(case.id)], id=case.id) for case in CASES],
)
@pytest.mark.one_backend  # parsing an error body: the backend cannot matter
async def test_the_sizes_an_overflow_names_are_read(
    fmt: str, status: int, body: dict[str, Any], sizes: tuple[int | None, int | None]
) -> None:
    fake = WireFake(fmt, [Fail(status, body=body)])
    provider = fake.provider(api_key="k")
    with pytest.raises(ProviderError) as failed:
        async for _ in provider.stream(ModelRequest(messages=[UserMessage.of("hi")])):
            pass
    found = overflow_sizes(failed.value.message)
    assert (found.requested, found.limit) == sizes, failed.value.message

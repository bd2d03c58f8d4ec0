"""Calibration (docs/context.md): the estimate follows what the provider counts, not what
tiktoken counts. A local OpenAI-compatible server on 127.0.0.1 counts like llama.cpp with a
2,048-token context — its tokenizer makes 1.6 times tiktoken's tokens, plus a chat
template's — refuses a larger request with llama.cpp's own error, and reports the prompt
tokens of what it accepts. A second run that outgrows the context must still complete:
reactively (after the server's refusal) and proactively (``context_window: 2048``)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AgentMessage,
    AssistantMessage,
    ToolCall,
    Usage,
    agent_loop,
    tool,
)
from treadle.context import CompactionPolicy
from treadle.context.calibration import CALIBRATION_KEY
from treadle.context.compaction import DEFAULT_SUMMARY_PROMPT
from treadle.context.tokens import load_encoding
from treadle.providers import OpenAIChat
from treadle.testing import Fail, WireFake, serve
from treadle.testing.exchange import RecordedRequest, Reply
from treadle.types import CompactionStart, ProviderRetry

pytestmark = pytest.mark.anyio

CONTEXT = 2048
RATIO = 1.6
TEMPLATE_TOKENS = 6  # llama.cpp's chat template around each message


def words(n: int, topic: str) -> str:
    """``n`` words of varied text about ``topic`` (tiktoken makes about one token a word)."""
    vocab = ["river", "stone", "lantern", "orbit", "cedar", "harbor", "signal", "meadow"]
    return " ".join(f"{topic}{i % 7} {vocab[i % len(vocab)]}" for i in range(n // 2))


@tool
def read(name: str) -> str:
    """Read a file."""
    return words(250, "line")


class LlamaCpp:
    """An OpenAI-compatible server counting tokens as llama.cpp would for a model whose
    tokenizer makes 1.6 times tiktoken's tokens."""

    def __init__(self, answers: Sequence[AssistantMessage | str], usage: bool = True) -> None:
        self.answers = list(answers)
        self.usage = usage  # False: a shim in front of it reports no prompt tokens
        self.fake = WireFake("openai", [])
        self.accepted: list[int] = []
        self.refused: list[int] = []
        encoding = load_encoding("cl100k_base")
        assert encoding is not None, "the cached cl100k_base encoding should load in tests"
        self.encoding = encoding

    def count(self, body: dict[str, Any]) -> int:
        texts: list[str] = []
        for message in body.get("messages", []):
            content = message.get("content") or ""
            if isinstance(content, list):
                content = " ".join(str(part.get("text", "")) for part in content)
            texts.append(str(content))
            for call in message.get("tool_calls") or []:
                texts.append(call["function"]["name"] + call["function"]["arguments"])
        texts.append(json.dumps(body.get("tools") or []))
        tokens = sum(len(self.encoding.encode_ordinary(t)) for t in texts)
        return math.ceil(RATIO * tokens) + TEMPLATE_TOKENS * len(body.get("messages", []))

    async def respond(self, request: RecordedRequest) -> Reply:
        body = request.json
        tokens = self.count(body)
        item: Any
        if tokens > CONTEXT:
            self.refused.append(tokens)
            item = Fail(
                400,
                body={
                    "error": {
                        "code": 400,
                        "message": f"request ({tokens} tokens) exceeds the available context "
                        f"size ({CONTEXT} tokens), try increasing it",
                        "type": "exceed_context_size_error",
                        "n_prompt_tokens": tokens,
                        "n_ctx": CONTEXT,
                    }
                },
            )
        else:
            self.accepted.append(tokens)
            first = body["messages"][0]
            if first["role"] == "system" and first["content"] == DEFAULT_SUMMARY_PROMPT:
                answer: AssistantMessage | str = "The user shared a document and a file."
            else:
                answer = self.answers.pop(0)
            if isinstance(answer, str):
                answer = AssistantMessage(content=answer)
            output = len(self.encoding.encode_ordinary(answer.text)) + 8
            usage = Usage(input=tokens, output=output, total_tokens=tokens + output)
            if not self.usage:
                usage = Usage(output=1)  # nothing to anchor on
            item = answer.model_copy(update={"usage": usage})
        self.fake.add(item)
        return await self.fake.respond(request)


def server(usage: bool = True) -> LlamaCpp:
    return LlamaCpp(
        usage=usage,
        answers=[
            AssistantMessage(content=[ToolCall(id="c1", name="read", arguments={"name": "a"})]),
            "The file and the document agree. " * 8,
            "Here is what the second document adds.",
        ],
    )


async def two_runs(
    llama: LlamaCpp, policy: CompactionPolicy, second: str
) -> tuple[AgentContext, list[AgentEvent], list[AgentMessage]]:
    async with serve(llama) as url:
        provider = OpenAIChat("local-model", api_key="none", base_url=url + "/v1")
        context = AgentContext(tools=[read])
        config = AgentLoopConfig(provider=provider, compaction=policy)
        first = await agent_loop(
            "Compare this document with file a:\n" + words(250, "doc"), context, config
        )
        assert isinstance(first[-1], AssistantMessage) and first[-1].error is None, first[-1]
        send, receive = anyio.create_memory_object_stream[AgentEvent](100_000)
        async with send:
            new = await agent_loop(second, context, config, send)
        async with receive:
            events = [event async for event in receive]
    return context, events, new


@pytest.mark.parametrize("usage", [True, False], ids=["direct", "shim-without-usage"])
async def test_reactive_compaction_recovers_on_the_second_run(usage: bool) -> None:
    llama = server(usage)
    policy = CompactionPolicy()  # the window is not known: the catalog's default
    context, events, new = await two_runs(llama, policy, "And this one?\n" + words(270, "more"))
    assert llama.refused, "the scenario must overflow the server once"
    assert events[-1].reason == "completed", new[-1]  # type: ignore[union-attr]
    assert isinstance(new[-1], AssistantMessage)
    assert new[-1].text == "Here is what the second document adds."
    # the overflow taught the real window and the tokenizer's ratio, kept in the context
    learned = context.state[CALIBRATION_KEY]["openai:local-model"]
    assert learned["window"] == CONTEXT and learned["ratio"] > 1.3


async def test_proactive_compaction_fires_on_the_calibrated_estimate() -> None:
    llama = server()
    policy = CompactionPolicy(context_window=CONTEXT)
    _context, events, new = await two_runs(llama, policy, "And this one?\n" + words(270, "more"))
    assert events[-1].reason == "completed", new[-1]  # type: ignore[union-attr]
    starts = [e for e in events if isinstance(e, CompactionStart)]
    assert [s.reason for s in starts] == ["threshold"]
    # calibrated on the first run's usage, the threshold fired before the server refused
    assert not llama.refused
    assert not [e for e in events if isinstance(e, ProviderRetry)]


async def test_a_request_that_cannot_fit_ends_with_a_clear_error() -> None:
    llama = server()
    policy = CompactionPolicy()
    _context, events, new = await two_runs(
        llama, policy, "Now this, all of it:\n" + words(1500, "huge")
    )
    assert events[-1].reason == "error"  # type: ignore[union-attr]
    last = new[-1]
    assert isinstance(last, AssistantMessage) and last.error is not None
    assert last.error.kind == "context_overflow"
    message = last.error.message
    assert "exceeds the available context size" in message  # the server's own words
    assert "compaction could not shrink the request" in message
    assert "nothing left to drop" in message and "2,048 tokens" in message
    # bounded: compacted again without sending while the estimate is over the size the
    # server named, so the server refused only the first request
    assert len(llama.refused) == 1

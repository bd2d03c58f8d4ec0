"""Cassettes keep binary content once: a file sent on every request of a recorded
conversation is one entry of the file's ``blobs``, and replay still matches bodies exactly."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pytest

from treadle import Agent, AssistantMessage, ToolCall, UserMessage, tool
from treadle.testing import Cassette, CassetteError, WireFake
from treadle.types import FileContent

pytestmark = pytest.mark.anyio

PDF = b"%PDF-1.7\n" + random.Random(3).randbytes(6000)
TURNS = 6


@tool
def fetch_chart() -> list[object]:
    """Today's chart."""
    return ["The chart:", FileContent.from_bytes(PDF, name="chart.pdf")]


def script() -> list[Any]:
    call = AssistantMessage(
        content=[ToolCall(id="toolu_1", name="fetch_chart", arguments={})], stop_reason="tool_use"
    )
    return [call, *(f"Answer {i}." for i in range(TURNS - 1))]


async def converse(cassette: Cassette, upstream: Any, pdf: bytes = PDF) -> list[str]:
    """The conversation's answers (or the error that ended a run)."""
    client = cassette.client(upstream)
    agent: Agent[Any] = Agent(
        WireFake.anthropic().provider("claude-sonnet-4-5", client=client), tools=[fetch_chart]
    )
    prompts: list[Any] = [UserMessage.of("Read", files=[FileContent.from_bytes(pdf)])]
    answers = []
    for prompt in prompts + [f"And {turn}?" for turn in range(TURNS - 2)]:
        result = await agent.run(prompt)
        answers.append(result.error.message if result.error else result.text)
    await client.aclose()
    return answers


@pytest.mark.one_backend  # recorded bytes and their encoding
async def test_a_file_on_every_request_is_recorded_once_and_replays(tmp_path: Path) -> None:
    path = tmp_path / "files.json"
    recorded = await converse(Cassette(path, mode="record"), WireFake.anthropic(script()))
    text = path.read_text()
    data = json.loads(text)
    encoded = base64.b64encode(PDF).decode()
    assert data["treadle_cassette"] == 2 and list(data["blobs"].values()) == [encoded]
    assert len(data["exchanges"]) == TURNS and text.count(encoded[:200]) == 1
    refs = text.count('"treadle_blob"')
    assert refs >= 2 * (TURNS - 1)  # the prompt's file and the tool's, in every later request

    replay = Cassette(path)  # bodies matched exactly, the files put back
    assert await converse(replay, None) == recorded
    replay.assert_all_played()
    first = [e["request"]["body"] for e in replay.exchanges]
    assert {id(b["messages"][0]["content"][1]["source"]["data"]) for b in first} == {
        id(replay.exchanges[0]["request"]["body"]["messages"][0]["content"][1]["source"]["data"])
    }  # one string in memory for the file, however many requests hold it

    other = bytearray(PDF)
    other[-1] ^= 1  # one byte differs: the request no longer matches
    refused = await converse(Cassette(path), None, bytes(other))
    assert "has no unplayed exchange" in refused[0] and "source.data" in refused[0]


@pytest.mark.one_backend
async def test_a_reference_to_a_missing_blob_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "files.json"
    await converse(Cassette(path, mode="record"), WireFake.anthropic(script()))
    data = json.loads(path.read_text())
    data["blobs"] = {}
    path.write_text(json.dumps(data))
    with pytest.raises(CassetteError, match="blob 'sha256:"):
        Cassette(path)
    data["treadle_cassette"] = 3
    path.write_text(json.dumps(data))
    with pytest.raises(CassetteError, match="newer"):
        Cassette(path)

"""A fake OpenAI-compatible model server for the durable-execution tests, in its own
process: `python fake_model.py LOG PORT_FILE`. It answers by the number of tool results in
the request (three tool turns, then a paced final answer) and writes to LOG one line per
request it got and one per response it finished sending — the server-side count."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio

from treadle import AssistantMessage, TextContent, ToolCall
from treadle.testing import FakeTransport, serve
from treadle.testing.exchange import RecordedRequest, Reply

TURNS = 3
FINAL = "All three steps are recorded: " + "the run finished exactly as planned. " * 6


def answer(request: RecordedRequest) -> AssistantMessage:
    done = sum(1 for m in request.json["messages"] if m.get("role") == "tool")
    if done < TURNS:
        call = ToolCall(id=f"call-{done}", name="record", arguments={"step": done})
        return AssistantMessage(content=[TextContent(text=f"Step {done}."), call])
    return AssistantMessage(content=FINAL)


class Counting:
    def __init__(self, fake: FakeTransport, log: Path) -> None:
        self.fake = fake
        self.log = log

    def write(self, line: str) -> None:
        with open(self.log, "a") as f:
            f.write(line + "\n")

    async def respond(self, request: RecordedRequest) -> Reply:
        key = sum(1 for m in (request.json or {}).get("messages", []) if m.get("role") == "tool")
        self.write(f"request {key}")
        reply = await self.fake.respond(request)
        chunks = reply.iter_chunks

        async def counted() -> Any:
            async for chunk in chunks():
                yield chunk
            self.write(f"completed {key}")

        reply.iter_chunks = counted  # type: ignore[method-assign]
        return reply


async def main() -> None:
    log, port_file = Path(sys.argv[1]), Path(sys.argv[2])
    fake = FakeTransport.openai(default=answer, delay=0.01)
    async with serve(Counting(fake, log)) as url:
        port_file.write_text(json.dumps({"url": url}))  # noqa: ASYNC240
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(main)

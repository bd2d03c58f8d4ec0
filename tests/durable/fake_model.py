"""A fake OpenAI-compatible model server for the durable-execution tests, in its own
process: `python fake_model.py LOG PORT_FILE`. It answers by the number of tool results in
the request (three tool turns, then a paced final answer) and writes to LOG one line per
request it got and one per response it finished sending — the server-side count. A run
whose tag starts with ``gate`` gets the first half of its final answer, then the rest only
once the file ``LOG.gate`` exists (``half <tag>:3`` is logged between). A run whose tag
starts with ``flaky`` has its first request's first response cut halfway (the connection
dropped, ``cut <tag>:0`` logged): the client retries it."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio

from treadle import AssistantMessage, TextContent, ToolCall
from treadle.testing import FakeTransport, serve
from treadle.testing.exchange import RecordedRequest, Reply

TURNS = 3
FINAL = "All three steps are recorded: " + "the run finished exactly as planned. " * 6


def tag_of(body: Any) -> str:
    """The run's tag: the ``[...]`` in its prompt."""
    for message in (body or {}).get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            found = re.search(r"\[([^\]]*)\]", text)
            return found.group(1) if found else ""
    return ""


HELPED = "The helper looked into it: " + "everything is where it should be. " * 8


def answer(request: RecordedRequest) -> AssistantMessage:
    """A run whose tag starts with ``par`` gets two parallel calls per turn (``call-Ka``,
    slow, and ``call-Kb``, fast: they finish in another order when replayed). A run whose
    tag starts with ``sub`` calls its ``helper`` sub-agent once (tag ``<tag>-helper``: a
    long answer), then ends."""
    done = sum(1 for m in request.json["messages"] if m.get("role") == "tool")
    tag = tag_of(request.json)
    if tag.startswith("sub"):
        if tag.endswith("-helper"):
            return AssistantMessage(content=HELPED)
        if done == 0:
            task = {"task": f"Look into it [{tag}-helper]"}
            call = ToolCall(id="call-h", name="helper", arguments=task)
            return AssistantMessage(content=[TextContent(text="Asking the helper."), call])
        return AssistantMessage(content=FINAL)
    if tag.startswith("par"):
        turn = done // 2
        if turn < TURNS:
            calls = [
                ToolCall(
                    id=f"call-{turn}{part}",
                    name="record",
                    arguments={"step": turn, "run": tag, "part": part},
                )
                for part in "ab"
            ]
            return AssistantMessage(content=[TextContent(text=f"Steps {turn}a, {turn}b."), *calls])
        return AssistantMessage(content=FINAL)
    if done < TURNS:
        args = {"step": done, "run": tag}
        call = ToolCall(id=f"call-{done}", name="record", arguments=args)
        return AssistantMessage(content=[TextContent(text=f"Step {done}."), call])
    return AssistantMessage(content=FINAL)


class Counting:
    def __init__(self, fake: FakeTransport, log: Path) -> None:
        self.fake = fake
        self.log = log
        self.cut: set[str] = set()  # the flaky runs' first requests, cut once

    def write(self, line: str) -> None:
        with open(self.log, "a") as f:
            f.write(line + "\n")

    async def respond(self, request: RecordedRequest) -> Reply:
        done = sum(1 for m in (request.json or {}).get("messages", []) if m.get("role") == "tool")
        key = f"{tag_of(request.json)}:{done}"
        self.write(f"request {key}")
        reply = await self.fake.respond(request)
        chunks = reply.iter_chunks

        gated = key.startswith("gate") and key.endswith(f":{TURNS}")
        gate = Path(str(self.log) + ".gate")
        cut = key.startswith("flaky") and key.endswith(":0") and key not in self.cut
        if cut:
            self.cut.add(key)
            reply.chunks = reply.chunks[: len(reply.chunks) // 2]
            reply.reset = True

        async def counted() -> Any:
            if cut:
                async for chunk in chunks():
                    yield chunk
                self.write(f"cut {key}")
                return
            if not gated:
                async for chunk in chunks():
                    yield chunk
            else:  # the first half, then the rest once the test opens the gate
                half = len(reply.chunks) // 2
                for n, chunk in enumerate(reply.chunks):
                    if n == half:
                        self.write(f"half {key}")
                        while not gate.exists():  # noqa: ASYNC110, ASYNC240
                            await anyio.sleep(0.01)
                    await anyio.sleep(reply.delay)
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

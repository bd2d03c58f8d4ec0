"""Your agent in the browser: ``web_app(agent)`` is a local web app — chat, a live run
inspector, sessions — served here with uvicorn on 127.0.0.1.

    pip install 'treadle[web]'
    python examples/web_ui.py --serve       # then open http://127.0.0.1:8000
    treadle ui web_ui:agent                 # the same, from this folder, with the CLI

Without ``--serve`` (as the test suite runs it) it starts the app on a free port, talks to
it over HTTP the way the page does (one message; the answer streams back as the Vercel AI UI
message stream, a tool call included), prints what came, and exits.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Sequence

import anyio
import httpx
import uvicorn

from treadle import Agent, AssistantMessage, ModelRequest, ToolCall, ToolResultMessage, tool
from treadle.providers import Provider, get_provider
from treadle.sessions import MemoryStore
from treadle.testing import ScriptedProvider, ScriptItem
from treadle.ui.web import web_app


def model_or_script(script: Sequence[ScriptItem]) -> Provider:
    """The model named by ``TREADLE_MODEL``; without one, a ScriptedProvider playing
    ``script`` (what a real model would plausibly answer), announced as offline: the
    example runs as it is, with no key and no network."""
    spec = os.environ.get("TREADLE_MODEL")
    if spec:
        return get_provider(spec)
    print("(offline: scripted model answers; set TREADLE_MODEL to use a real one)")
    return ScriptedProvider(script, name="offline", model="offline-script", delay=0.002)


@tool(category="info")
def weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city's name
    """
    return f"{city}: 21 °C, clear sky"


def offline_reply(request: ModelRequest) -> AssistantMessage:
    """What the offline stand-in answers: the weather tool first, then its result."""
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        return AssistantMessage(content=f"Here it is: **{last.text}**.")
    return AssistantMessage(
        content=[
            ToolCall(
                id=f"call-{len(request.messages)}", name="weather", arguments={"city": "Lisbon"}
            )
        ]
    )


agent = Agent(
    model_or_script([offline_reply] * 1000),
    tools=[weather],
    system_prompt="Be brief. Use the weather tool.",
    store=MemoryStore(),  # a SqliteStore("chats.db") keeps the sessions between starts
    name="weather desk",
)


async def check() -> None:
    """Serve the app on a free port, send one message as the page does, print the stream."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(web_app(agent), port=port, log_level="warning"))
    url = f"http://127.0.0.1:{port}"
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        for _ in range(400):  # up to 20 s for the server to listen
            if server.started:
                break
            await anyio.sleep(0.05)
        body = {
            "id": "example-chat",
            "messages": [
                {
                    "id": "u1",
                    "role": "user",
                    "parts": [{"type": "text", "text": "Weather in Lisbon?"}],
                }
            ],
        }
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            # every POST carries the page's Origin: the app refuses others
            headers = {"origin": url}
            async with client.stream("POST", "/api/chat", json=body, headers=headers) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: {"):
                        chunk = json.loads(line[6:])
                        if chunk["type"] == "text-delta":
                            print(chunk["delta"], end="", flush=True)
                        elif chunk["type"] in ("tool-input-available", "tool-output-available"):
                            print(
                                f"[{chunk['type']}] {chunk.get('output', chunk.get('input', ''))}"
                            )
            print()
            sessions = (await client.get("/api/sessions")).json()["sessions"]
            print(f"sessions kept: {[s['title'] for s in sessions]}")
        server.should_exit = True


if __name__ == "__main__":
    if "--serve" in sys.argv:
        uvicorn.run(web_app(agent), host="127.0.0.1", port=8000, log_level="warning")
    else:
        anyio.run(check)

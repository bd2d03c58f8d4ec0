"""Serve an agent to other software: the OpenAI API and MCP on one port, offline.

    python serve_agent.py                                 # serve, call it both ways, stop
    treadle serve serve_agent:agent --openai --mcp        # the same agent, until Ctrl-C

The agent answers with an offline model (no key, no network) that calls its weather tool.
This script serves it on 127.0.0.1 (a free port), asks it a question with the official
``openai`` SDK (Chat Completions, then the Responses API, where the tool shows as an
``mcp_call`` item) and with the official ``mcp`` client (the agent is a tool), then stops.
See docs/serve.md.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import anyio
import uvicorn

from treadle import Agent, AssistantMessage, ToolCall, ToolResultMessage, tool
from treadle.providers import ModelRequest
from treadle.testing import ScriptedProvider
from treadle.ui.agent_server import agent_server_app


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny and 21 °C in {city}."


class OfflineModel:
    """Calls the weather tool for a question, then answers with its result (offline)."""

    name = "offline"
    model = "offline-example"

    def stream(self, request: ModelRequest, *, cancel: Any = None) -> Any:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            reply: Any = f"(offline model) {last.text}"
        else:
            call = ToolCall(id="call_1", name="weather", arguments={"city": "Lisbon"})
            reply = AssistantMessage(content=[call])
        return ScriptedProvider([reply], name=self.name, model=self.model).stream(
            request, cancel=cancel
        )


agent = Agent(OfflineModel(), tools=[weather], name="assistant")
agent.description = "Answers questions about the weather."


def main() -> None:
    import openai

    from mcp import Client

    print("(offline: a scripted model answers)")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = agent_server_app(agent, openai=True, mcp=True)  # what `treadle serve` serves
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="no token on loopback")
        question = [{"role": "user", "content": "What's the weather in Lisbon?"}]
        chat = client.chat.completions.create(model="assistant", messages=question)
        print("chat:     ", chat.choices[0].message.content)
        response = client.responses.create(model="assistant", input=question)
        print("responses:", [item.type for item in response.output], response.output_text)

        async def over_mcp() -> str:
            async with Client(f"{url}/mcp") as mcp:
                result = await mcp.call_tool("assistant", {"prompt": "Weather in Lisbon?"})
            return "".join(getattr(block, "text", "") for block in result.content)

        print("mcp:      ", anyio.run(over_mcp))
    finally:
        server.should_exit = True
        thread.join(10)


if __name__ == "__main__":
    main()

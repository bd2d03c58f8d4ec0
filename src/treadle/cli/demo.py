"""The offline demo ``treadle ui`` serves when no model is configured: the quickstart's two
tools and a clearly labelled offline model that calls them when asked."""

from __future__ import annotations

import re

import anyio

from ..providers.base import ModelRequest
from ..testing import ScriptedProvider
from ..testing.scripted import ScriptItem
from ..tools import tool
from ..types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage


@tool(category="info")
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


@tool(category="info")
async def weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city's name
    """
    await anyio.sleep(0.3)  # pretend to call a weather service
    return f"{city}: 21 °C, clear sky"


def _demo_reply(request: ModelRequest) -> AssistantMessage:
    last = request.messages[-1] if request.messages else None
    if isinstance(last, ToolResultMessage):
        results = [m.text for m in request.messages[-4:] if isinstance(m, ToolResultMessage)]
        return AssistantMessage(
            content="(offline model) The tools returned: **" + "**; **".join(results) + "**."
        )
    text = last.text if isinstance(last, UserMessage) else ""
    numbers = [float(n) for n in re.findall(r"\d+(?:\.\d+)?", text)][:2]
    city = re.findall(r"weather in (\w+)", text)
    calls = []
    if len(numbers) == 2:
        calls.append(
            ToolCall(id="call_add", name="add", arguments={"a": numbers[0], "b": numbers[1]})
        )
    if city or "weather" in text.lower():
        calls.append(
            ToolCall(id="call_weather", name="weather", arguments={"city": (city or ["Lisbon"])[0]})
        )
    if calls:
        return AssistantMessage(content=[TextContent(text="I'll use the tools."), *calls])
    return AssistantMessage(
        content=(
            f"(offline model) You said: *{text}*. I am not a real model: set `TREADLE_MODEL` "
            "(for example `openai:gpt-4o-mini`) to talk to one. Ask me *what is 17 + 25 and "
            "the weather in Lisbon?* to see two tools run at once."
        )
    )


class DemoModel(ScriptedProvider):
    """The labelled offline model ``treadle ui`` uses when no model is configured: it calls
    the demo tools (``add``, ``weather``) when asked, and says what it is otherwise."""

    def __init__(self, *, delay: float = 0.01) -> None:
        super().__init__([], name="offline", model="offline-demo", chunks=24, delay=delay)

    @property
    def remaining(self) -> int:
        return 1

    def _next_item(self) -> ScriptItem:
        return _demo_reply

"""Evals for the quickstart agent: a dataset with known answers, scored offline.

Run it with ``python examples/evals.py`` (a table of scores), or from the shell::

    treadle eval examples/evals.py --repeat 5 --html report.html --json last.json
    treadle eval examples/evals.py --repeat 5 --baseline last.json    # exit 1 on a regression

It defines ``dataset`` and ``agent``, which is what ``treadle eval`` looks for. The agent is
the quickstart's (``add`` and ``weather``); ``weather``'s answers are recorded in the cases,
so no weather service is called. Set ``TREADLE_MODEL`` (e.g. ``openai:gpt-4o-mini`` with
``OPENAI_API_KEY``) to measure a real model, which also judges; with nothing configured, a
labelled offline stand-in answers (and judges), so the run, the tools and the scores are real.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import AsyncIterator, Callable

import anyio

from treadle import (
    Agent,
    AssistantMessage,
    CancellationToken,
    ModelRequest,
    Provider,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    tool,
)
from treadle.evals import Bounds, Call, Case, Contains, Dataset, Judge, Trajectory
from treadle.providers import StreamEvent
from treadle.testing import ScriptedProvider

LISBON = "Lisbon: 21 °C, clear sky"


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
    raise RuntimeError("the weather service is not part of this example: the cases record it")


def stand_in_answer(request: ModelRequest) -> AssistantMessage:
    """What the offline stand-in says: the tools a question needs, then their results."""
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        results = [m.text for m in request.messages if isinstance(m, ToolResultMessage)]
        return AssistantMessage(content=[TextContent(text="; ".join(results))])
    text = last.text if isinstance(last, UserMessage) else ""
    numbers = [float(n) for n in re.findall(r"\d+(?:\.\d+)?", text)][:2]
    cities = re.findall(r"weather in (\w+)", text)
    calls = []
    if len(numbers) == 2:
        calls.append(ToolCall(id="c_add", name="add", arguments={"a": numbers[0], "b": numbers[1]}))
    if cities:
        calls.append(ToolCall(id="c_weather", name="weather", arguments={"city": cities[0]}))
    return AssistantMessage(content=calls or [TextContent(text="Hello! Ask me a sum.")])


def stand_in_verdict(request: ModelRequest) -> AssistantMessage:
    """The offline judge: the answer passes when it holds the sum's result."""
    sent = request.messages[-1]
    text = sent.text if isinstance(sent, UserMessage) else ""
    answer = text.rsplit("## The assistant's answer\n", 1)[-1]
    ok = "42" in answer
    verdict = {"reasoning": f"the answer {'gives' if ok else 'lacks'} 42", "score": int(ok)}
    return AssistantMessage(content=[TextContent(text=json.dumps(verdict))])


class StandIn:
    """A labelled offline model: each request answered by ``respond`` (any number of
    requests, in any order, so samples may run at once)."""

    def __init__(self, name: str, respond: Callable[[ModelRequest], AssistantMessage]) -> None:
        self.name, self.model, self.respond = "offline", name, respond

    def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        once = ScriptedProvider([self.respond], name=self.name, model=self.model)
        return once.stream(request, cancel=cancel)


def model(offline: StandIn) -> Provider | str:
    return os.environ.get("TREADLE_MODEL") or offline


agent = Agent(
    model(StandIn("stand-in", stand_in_answer)),
    tools=[add, weather],
    system_prompt="Be brief. Use the tools.",
    name="quickstart",
)

dataset = Dataset(
    [
        Case(
            "sum",
            input="What is 17 + 25?",
            expected_output="42",
            evaluators=[Contains(), Trajectory([Call("add", {"a": 17, "b": 25})])],
            tags=["tools"],
        ),
        Case(
            "weather",
            input="What is the weather in Lisbon?",
            tools={"weather": LISBON},  # recorded: the real tool never runs
            evaluators=[Contains("clear sky"), Trajectory(["weather"], mode="exact")],
            tags=["tools"],
        ),
        Case(
            "both",
            input="What is 17 + 25, and what is the weather in Lisbon?",
            tools={"weather": LISBON},
            evaluators=[Contains(["42", "Lisbon"]), Trajectory(["add", "weather"])],
            tags=["tools"],
        ),
        Case(
            "greeting",
            input="Hi!",
            evaluators=[Trajectory([], mode="exact"), Bounds(max_turns=1, name="one turn")],
        ),
        Case(
            "judged",
            input="What is 40 + 2?",
            evaluators=[
                Judge(
                    "The answer gives the sum of the two numbers asked about.",
                    model=model(StandIn("stand-in-judge", stand_in_verdict)),
                )
            ],
        ),
    ],
    name="quickstart",
    evaluators=[Bounds(max_turns=3)],
)


async def main() -> int:
    if not os.environ.get("TREADLE_MODEL"):
        print("No model configured (set TREADLE_MODEL): the OFFLINE stand-in answers and judges.")
    report = await dataset.evaluate(agent, repeat=3)
    report.print()
    return 0 if report.pass_rate == 1.0 else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))

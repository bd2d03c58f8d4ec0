"""A dataset with known answers run on a scripted model whose mistakes are planted, sample by
sample: every score, pass rate, pass@k, trajectory verdict, bound and judge verdict comes
out exactly as planted, on asyncio and trio."""

from __future__ import annotations

import json
import math
from typing import Any

import anyio
import pytest

from treadle import Agent, AssistantMessage, ModelRequest, TextContent, ToolCall, Usage, tool
from treadle.evals import (
    Bounds,
    Call,
    Case,
    Contains,
    Dataset,
    Equals,
    EvalReport,
    Judge,
    ToolAnswer,
    Trajectory,
)
from treadle.testing import ScriptedProvider

REAL_WEATHER_CALLS: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    REAL_WEATHER_CALLS.append(city)  # a case's recorded answers must keep this from running
    raise RuntimeError("the weather service is not reachable from tests")


def make_agent(model: Any) -> Agent[None]:
    return Agent(model, tools=[add, weather], system_prompt="Be brief.")


def call(name: str, **args: Any) -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id=f"c_{name}", name=name, arguments=args)])


def calls(*pairs: tuple[str, dict[str, Any]]) -> AssistantMessage:
    return AssistantMessage(
        content=[ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(pairs)]
    )


def said(text: str, cost: float | None = None) -> AssistantMessage:
    usage = Usage(input=10, output=5, total_tokens=15, cost_usd=cost) if cost else Usage()
    return AssistantMessage(content=[TextContent(text=text)], usage=usage)


def from_tool(prefix: str) -> Any:
    """An answer made of the last tool result, as a model reading it would."""

    def answer(request: ModelRequest) -> AssistantMessage:
        return said(prefix + request.messages[-1].text)

    return answer


# case name -> one script per repeat; the planted mistakes are commented
SCRIPTS: dict[str, list[list[Any]]] = {
    "sum": [
        [call("add", a=17, b=25), from_tool("It is ")],
        [call("add", a=17, b=25), from_tool("It is ")],
        [call("add", a=17, b=52), from_tool("It is ")],  # wrong arguments: 69
        [call("add", a=17, b=25), from_tool("It is ")],
        [said("It is 42.")],  # right answer, no tool: the exact trajectory fails
    ],
    "weather": [
        [call("weather", city="Lisbon"), from_tool("Lisbon now: ")],
        [call("weather", city="Lisbon"), from_tool("Lisbon now: ")],
        [call("weather", city="Lisbon"), from_tool("Lisbon now: ")],
        [call("weather", city="Porto"), from_tool("Sorry: ")],  # the wrong city
        [call("weather", city="Lisbon"), from_tool("Lisbon now: ")],
    ],
    "hello": [
        [said("Hello!")],
        [call("add", a=1, b=1), said("Hello!")],  # a tool it did not need
        [said("Hello!")],
        [said("hello!")],  # wrong case: Equals fails, the trajectory holds
        [said("Hello!")],
    ],
    "ordered": [
        [calls(("weather", {"city": "Lisbon"}), ("add", {"a": 1, "b": 2})), said("3; clear")],
        [calls(("add", {"a": 1, "b": 2}), ("weather", {"city": "Lisbon"})), said("3; clear")],
        [calls(("add", {"a": 1, "b": 2}), ("weather", {"city": "Lisbon"})), said("3; clear")],
        [call("add", a=1, b=2), said("3")],  # never asked for the weather
        [calls(("add", {"a": 1, "b": 2}), ("weather", {"city": "Lisbon"})), said("3; clear")],
    ],
    "judged": [
        [said("Lisbon is clear and mild.")],
        [said("Lisbon is clear and mild.")],
        [said("Lisbon is cloudy.")],  # the judge fails this one
        [said("Lisbon is clear.")],
        [said("Lisbon is clear, 21 degrees.")],
    ],
    "budget": [
        [said("ok", cost=0.002)],
        [said("ok", cost=0.002)],
        [said("ok", cost=0.002)],
        [said("ok", cost=0.002)],
        [said("ok", cost=0.02)],  # over the cost bound
    ],
    "chat": [
        [said("2 + 2 = 4."), said("4 * 3 = 12.")],
        [said("2 + 2 = 4."), said("4 * 3 = 12.")],
        [said("2 + 2 = 5.")],  # wrong first answer: the scripted user stops there
        [said("2 + 2 = 4."), said("4 * 3 = 12.")],
        [said("2 + 2 = 4."), said("4 * 3 = 13.")],  # wrong second answer
    ],
}

LISBON = "Lisbon: 21 °C, clear sky"


def judge_verdict(request: ModelRequest) -> AssistantMessage:
    """A scripted judge: reads the answer it is sent and passes it when it says clear."""
    answer = request.messages[-1].text.split("## The assistant's answer\n", 1)[1]
    ok = "clear" in answer
    verdict = {
        "reasoning": f"the answer {'says' if ok else 'does not say'} the sky is clear",
        "score": 1 if ok else 0.2,
        "pass": ok,
    }
    return AssistantMessage(
        content=[TextContent(text=json.dumps(verdict))],
        usage=Usage(input=100, output=20, total_tokens=120, cost_usd=0.001),
    )


def next_user_turn(result: Any, sent: int) -> str | None:
    return "And times 3?" if sent == 1 and "= 4." in result.text else None


def dataset() -> Dataset:
    judge = Judge(
        "The answer says the sky in Lisbon is clear.",
        model=ScriptedProvider([judge_verdict] * 5, name="judge", model="judge-model"),
    )
    return Dataset(
        [
            Case(
                "sum",
                input="What is 17 + 25?",
                expected_output="42",
                evaluators=[Contains(), Trajectory([Call("add", {"a": 17, "b": 25})], "exact")],
            ),
            Case(
                "weather",
                input="The weather in Lisbon?",
                tools={"weather": [ToolAnswer(LISBON, arguments={"city": "Lisbon"})]},
                evaluators=[Contains("clear"), Trajectory(["weather"])],
                tags=["tools"],
            ),
            Case(
                "hello",
                input="Say hello.",
                evaluators=[Equals("Hello!"), Trajectory([], mode="exact")],
            ),
            Case(
                "ordered",
                input="Add 1 and 2, then the weather in Lisbon.",
                tools={"weather": LISBON},
                evaluators=[Trajectory(["add", "weather"], mode="ordered")],
                tags=["tools"],
            ),
            Case("judged", input="How is Lisbon?", evaluators=[judge]),
            Case("budget", input="ok?", evaluators=[Bounds(max_cost_usd=0.01, max_turns=1)]),
            Case("chat", input="What is 2 + 2?", user=next_user_turn, evaluators=[Contains("12")]),
        ],
        name="planted",
    )


def planted_model(case: Case, repeat: int) -> ScriptedProvider:
    return ScriptedProvider(SCRIPTS[case.name][repeat], model="planted-model")


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def report(request: pytest.FixtureRequest) -> EvalReport:
    """The dataset run once per backend (5 samples of each case, 3 at a time)."""
    REAL_WEATHER_CALLS.clear()

    async def run() -> EvalReport:
        return await dataset().evaluate(
            make_agent,
            models={"planted": planted_model},
            repeat=5,
            pass_k=[1, 2, 5],
            concurrency=3,
        )

    return anyio.run(run, backend=request.param)


def values(report: EvalReport, case: str, evaluator: str) -> list[float]:
    return [s.score_of(evaluator).value for s in report.case(case).samples]  # type: ignore[union-attr]


def passes(report: EvalReport, case: str) -> list[bool]:
    return [s.passed for s in report.case(case).samples]


def test_scores_and_pass_rates_are_as_planted(report: EvalReport) -> None:
    assert values(report, "sum", "contains") == [1, 1, 0, 1, 1]
    assert values(report, "sum", "trajectory") == [1, 1, 0, 1, 0]
    assert passes(report, "sum") == [True, True, False, True, False]
    sums = report.case("sum")
    assert sums.score == pytest.approx(0.7)  # samples 1, 1, 0, 1, 0.5
    assert sums.spread == pytest.approx(math.sqrt(0.16))
    assert sums.pass_rate == 0.6
    assert sums.evaluators["contains"].mean == 0.8
    assert sums.evaluators["trajectory"].pass_rate == 0.6
    assert passes(report, "weather") == [True, True, True, False, True]
    assert passes(report, "hello") == [True, False, True, False, True]
    assert values(report, "hello", "equals") == [1, 1, 1, 0, 1]
    assert passes(report, "budget") == [True, True, True, True, False]
    assert values(report, "budget", "bounds") == [1, 1, 1, 1, 0.5]
    assert passes(report, "chat") == [True, True, False, True, False]
    # every sample ran: nothing errored, nothing is missing
    assert all(s.error is None for s in report.samples) and not report.cancelled
    assert len(report.samples) == 7 * 5


def test_pass_at_k_is_the_unbiased_estimate(report: EvalReport) -> None:
    # 3 of 5 passed: pass@1 = 3/5, pass@2 = 1 - C(2,2)/C(5,2) = 0.9, pass@5 = 1
    assert report.case("sum").pass_at == {1: 0.6, 2: 0.9, 5: 1.0}
    # 4 of 5: pass@2 = 1 - 0/10
    assert report.case("weather").pass_at == {1: 0.8, 2: 1.0, 5: 1.0}
    assert report.case("budget").pass_at[1] == 0.8
    summary = report.summary("planted")
    passed = [3, 4, 3, 3, 4, 4, 3]  # sum, weather, hello, ordered, judged, budget, chat
    assert summary.pass_rate == pytest.approx(sum(passed) / 35)
    assert summary.pass_at[1] == pytest.approx(sum(passed) / 35)


def test_the_trajectory_checks_give_the_planted_reasons(report: EvalReport) -> None:
    sums = report.case("sum").samples
    assert sums[2].score_of("trajectory").reason == (  # type: ignore[union-attr]
        "call 1: expected add(a=17, b=25, …), got add({'a': 17, 'b': 52})"
    )
    assert sums[4].score_of("trajectory").reason == (  # type: ignore[union-attr]
        "1 calls expected, 0 made (no tool calls)"
    )
    hello = report.case("hello").samples[1].score_of("trajectory")
    assert hello is not None and not hello.passed and "0 calls expected, 1 made" in hello.reason
    ordered = values(report, "ordered", "trajectory")
    assert ordered == [0.5, 1, 1, 0.5, 1]
    reason = report.case("ordered").samples[0].score_of("trajectory").reason  # type: ignore[union-attr]
    assert reason == "1 of 2 in order; weather not found after them in [weather, add]"
    assert report.case("sum").samples[0].tool_calls == [
        {"name": "add", "arguments": {"a": 17, "b": 25}}
    ]


def test_recorded_tool_answers_stand_in_for_the_tool(report: EvalReport) -> None:
    assert REAL_WEATHER_CALLS == []  # the real tool never ran
    weather = report.case("weather").samples
    assert weather[0].text == f"Lisbon now: {LISBON}"
    # a call the case has no recording for gets an error result naming the arguments
    porto = weather[3]
    assert porto.text.startswith("Sorry: no recorded answer of weather for the arguments")
    tool_turn = next(t for t in porto.transcript if t["role"] == "tool")
    assert tool_turn["is_error"] and "'city': 'Porto'" in tool_turn["text"]
    assert weather[3].score_of("trajectory").passed  # type: ignore[union-attr]


def test_the_scripted_judge_verdicts_and_cost(report: EvalReport) -> None:
    judged = report.case("judged")
    verdicts = [s.score_of("judge") for s in judged.samples]
    assert [v.passed for v in verdicts] == [True, True, False, True, True]  # type: ignore[union-attr]
    assert [v.value for v in verdicts] == [1, 1, 0.2, 1, 1]  # type: ignore[union-attr]
    cloudy = verdicts[2]
    assert cloudy is not None and cloudy.reason == "the answer does not say the sky is clear"
    assert cloudy.details is not None and cloudy.details["model"] == "judge:judge-model"
    assert json.loads(cloudy.details["verdict"])["pass"] is False
    # the judge's own tokens and cost, counted apart from the agent's
    assert cloudy.usage is not None and cloudy.usage.cost_usd == 0.001
    assert judged.samples[2].eval_usage.total_tokens == 120
    assert judged.eval_cost_usd == pytest.approx(0.005)
    assert report.summary().eval_cost_usd == pytest.approx(0.005)
    assert judged.cost_usd is None  # the agent's scripted answers carried no price


def test_bounds_read_the_agents_cost_and_turns(report: EvalReport) -> None:
    budget = report.case("budget").samples
    assert budget[0].usage.cost_usd == 0.002
    assert budget[4].score_of("bounds").reason == (  # type: ignore[union-attr]
        "cost $0.0200 > $0.0100; turns 1 ≤ 1"
    )
    assert report.case("budget").cost_usd == pytest.approx(0.028)


def test_a_scripted_user_carries_the_conversation(report: EvalReport) -> None:
    chat = report.case("chat").samples
    users = [[t["text"] for t in s.transcript if t["role"] == "user"] for s in chat]
    assert users[0] == ["What is 2 + 2?", "And times 3?"]
    assert users[2] == ["What is 2 + 2?"]  # the wrong first answer ended it
    assert chat[0].turns == 2 and chat[2].turns == 1
    assert chat[4].text == "4 * 3 = 13."


def test_the_report_round_trips_through_json(report: EvalReport, tmp_path: Any) -> None:
    path = report.save(tmp_path / "report.json")
    again = EvalReport.load(path)
    assert again.case("sum").pass_at == {1: 0.6, 2: 0.9, 5: 1.0}
    assert again.case("judged").samples[2].scores == report.case("judged").samples[2].scores
    assert all(s.events == [] for s in again.samples)  # events stay out of JSON by default
    assert report.case("sum").samples[0].events  # ...and in the report (the HTML uses them)
    assert "sum" in report.table() and "pass@5 " in report.table()

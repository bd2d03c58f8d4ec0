"""The HTML report in headless chromium, opened from a file as a reader would: its summary and
cases with the baseline's marks, a case's samples, scores and the judge's reasoning, and the
web UI's inspector over a sample's events (timeline, events, the request sent). Nothing is
fetched, and text from a run is only ever text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.browser import CHROMIUM

from treadle import Agent, AssistantMessage, TextContent, ToolCall, Usage, tool
from treadle.evals import Case, Contains, Dataset, EvalReport, Judge, Trajectory
from treadle.evals.html import json_for_script
from treadle.testing import ScriptedProvider
from treadle.types import ThinkingContent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed"),
]

HOSTILE = '</script><img src=x onerror="window.__pwned=1"><b>bold</b>'


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def verdict(ok: bool) -> AssistantMessage:
    text = json.dumps({"reasoning": "names 42" if ok else "no 42 in it", "score": int(ok)})
    return AssistantMessage(
        content=[ThinkingContent(thinking="Let me look for 42."), TextContent(text=text)],
        usage=Usage(input=50, output=10, total_tokens=60, cost_usd=0.0005),
    )


def run(answers: dict[str, list[str]]) -> EvalReport:
    def model(case: Case, repeat: int) -> ScriptedProvider:
        answer = answers[case.name][repeat]
        if case.name == "sum":
            return ScriptedProvider(
                [
                    AssistantMessage(
                        content=[ToolCall(id="c1", name="add", arguments={"a": 40, "b": 2})]
                    ),
                    answer,
                ]
            )
        return ScriptedProvider([answer])

    def judge_answer(request: Any) -> AssistantMessage:
        return verdict("42" in request.messages[-1].text.split("answer\n")[-1])

    judge = Judge("The answer is 42.", model=ScriptedProvider([judge_answer] * 2, model="judge-1"))
    dataset = Dataset(
        [
            Case(
                "sum",
                input="What is 40 + 2?",
                evaluators=[Contains("42"), Trajectory(["add"]), judge],
            ),
            Case("echo <b>", input=HOSTILE, evaluators=[Contains("hello")]),
        ],
        name="html <report>",
    )

    async def go() -> EvalReport:
        return await dataset.evaluate(
            lambda m: Agent(m, tools=[add], system_prompt="Answer with the number."),
            models={"scripted": model},
            repeat=2,
            concurrency=1,
        )

    return anyio.run(go)


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    baseline = run({"sum": ["42", "42"], "echo <b>": ["no", "no"]})
    report = run({"sum": ["42", "41"], "echo <b>": ["hello " + HOSTILE, "no"]})
    report.compare(baseline)
    return report.write_html(tmp_path_factory.mktemp("html") / "report.html")


@pytest.fixture(scope="module")
def tab(chromium: str, report_file: Path) -> Iterator[Any]:
    from tests.webapp.page import open_tab

    with open_tab(chromium, report_file.as_uri()) as opened:
        yield opened


@pytest.fixture
def page(tab: Any) -> Any:
    """The report loaded afresh at its first view (no case open)."""
    tab.js("history.replaceState(null, '', location.pathname)")
    tab.reload()
    return tab


def texts(page: Any, selector: str, what: str = "innerText") -> list[Any]:
    return list(
        page.js(f"[...document.querySelectorAll({json.dumps(selector)})].map(e => e.{what})")
    )


def test_the_summary_and_cases_carry_the_baselines_marks(page: Any) -> None:
    assert page.js("document.title") == "html <report> · treadle eval"
    rows = texts(page, "[data-testid=case-row]", "dataset.case")
    assert rows == ["sum", "echo <b>"]
    marks = texts(page, "[data-testid=case-row] [data-testid=change]", "dataset.status")
    assert marks == ["regressed", "improved"]
    scores = texts(page, "[data-testid=case-score]", "textContent")
    assert scores[1] == "0.50 ±0.50 · 1/2"
    change = page.js("document.querySelector('[data-testid=model-change]').dataset.status")
    assert change == "improved"  # sum 1 -> 0.67, echo 0 -> 0.5: the mean went up
    assert page.js("document.querySelector('[data-testid=cancelled]')") is None


def test_a_case_shows_its_samples_scores_and_the_judges_reasoning(page: Any) -> None:
    page.js("document.querySelector('[data-testid=case-score]').click()")
    assert page.js("document.querySelector('[data-testid=detail]').dataset.case") == "sum"
    assert texts(page, "[data-testid=sample]", "dataset.passed") == ["true", "false"]
    page.js("[...document.querySelectorAll('[data-testid=sample]')][1].click()")
    rows = texts(page, "[data-testid=score-row]", "dataset.name")
    assert rows == ["contains", "trajectory", "judge"]
    passed = texts(page, "[data-testid=score-row]", "dataset.passed")
    assert passed == ["false", "true", "false"]
    judge = page.js("document.querySelector('[data-testid=score-row][data-name=judge]').innerText")
    assert "no 42 in it" in judge and "judged by scripted:judge-1" in judge
    assert "the judge's thinking" in judge
    transcript = page.js("document.querySelector('[data-testid=transcript]').innerText")
    assert '→ add({"a":40,"b":2})' in transcript and "41" in transcript
    assert page.js("location.hash") == "#case=sum&model=scripted&sample=1"


def test_the_inspector_shows_the_samples_run(page: Any) -> None:
    page.js("document.querySelector('[data-testid=case-score]').click()")
    kinds = texts(page, "[data-testid=timeline-item]", "dataset.kind")
    assert kinds == ["run", "turn", "model", "tool", "turn", "model"]
    page.js("[...document.querySelectorAll('[data-testid=timeline-item]')][3].click()")
    raw = json.loads(page.js("document.querySelector('[data-testid=raw-events]').textContent"))
    assert [e["type"] for e in raw] == ["tool_execution_start", "tool_execution_end"]
    assert raw[1]["result"]["content"][0]["text"] == "42"
    page.js("[...document.querySelectorAll('[data-testid=timeline-item]')][2].click()")
    page.js("document.querySelector('[data-testid=view-request]').click()")
    sent = page.js("document.querySelector('[data-testid=raw-events]').textContent")
    assert "── system prompt ──\nAnswer with the number." in sent
    assert "add: Add two numbers." in sent and "What is 40 + 2?" in sent


def test_text_from_a_run_stays_text_and_nothing_is_fetched(page: Any) -> None:
    page.js("[...document.querySelectorAll('[data-testid=case-score]')][1].click()")
    transcript = page.js("document.querySelector('[data-testid=transcript]').innerText")
    assert HOSTILE in transcript
    assert page.js("document.querySelectorAll('img, b').length") == 0
    assert page.js("window.__pwned === undefined")
    assert page.js("performance.getEntriesByType('resource').length") == 0
    assert page.js("document.querySelector('[data-testid=detail] h2').textContent") == (
        "echo <b> · scripted"
    )


def test_the_reports_own_assets_write_no_markup_and_fetch_nothing() -> None:
    from treadle.evals.html import HERE

    for asset in HERE.iterdir():
        text = asset.read_text(encoding="utf-8")
        assert "innerHTML" not in text and "insertAdjacentHTML" not in text, asset.name
        assert "http://" not in text and "https://" not in text, asset.name


def test_data_in_the_page_cannot_close_its_script_element() -> None:
    text = json_for_script({"a": "</script><!-- \u2028 & >"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><!-- \u2028 & >"}

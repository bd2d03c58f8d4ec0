"""The official TypeScript clients, under Node, against a running treadle endpoint:
``@ag-ui/client``'s HttpAgent and the ``ai`` package's DefaultChatTransport (what
``useChat`` uses) + readUIMessageStream. They must rebuild the same text, tool calls and
results treadle produced — through a tool round trip, a front-end / client-side tool, an
approval and a connection dropped mid-answer — on Node 20 with ai 6 and on Node 22 with
ai 7 (which declares node >= 22). The resume recipes of docs/ui.md run too, extracted from
the page, through a proxy that drops the connection mid-answer."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.node_packages import install

from .expected import CITED, STORY, WEATHER

JS = Path(__file__).with_name("js")

# a Node install (cached) and a client run per setup: long units, so scheduled first
pytestmark = pytest.mark.slow


DOCS = Path(__file__).resolve().parents[2] / "docs" / "ui.md"
JS_FILE = re.compile(r"<!-- js-file: (\S+) -->\n```js\n(.*?)^```", re.S | re.M)
SETUPS = {
    # the Node on PATH (Debian's: 20) with ai 6 — ai 7 declares node >= 22
    "node20-ai6": (JS, None),
    # Node 22 from the npm registry (the `node` package) with ai 7
    "node22-ai7": (JS.with_name("js22"), "node_modules/.bin/node"),
}


def docs_snippets(folder: Path) -> Path:
    """The JavaScript files docs/ui.md ships (``<!-- js-file: name -->`` before a fence),
    written to ``folder`` for the clients to import."""
    found = JS_FILE.findall(DOCS.read_text(encoding="utf-8"))
    assert {name for name, _ in found} == {
        "last-event-id.mjs",
        "ag-ui-resume.mjs",
        "ai-sdk-resume.mjs",
    }, found
    for name, code in found:
        (folder / name).write_text(code, encoding="utf-8")
    return folder


@pytest.fixture(scope="module", params=sorted(SETUPS))
def clients(
    request: pytest.FixtureRequest, ui_server: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    folder, own_node = SETUPS[request.param]
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js and npm are not on this machine (apt-get install nodejs npm)")
    needs = ["@ag-ui/client", "ai"] + ([own_node.removeprefix("node_modules/")] if own_node else [])
    problem = install(folder, needs, timeout=600)
    if problem is not None:
        pytest.skip(f"the clients: {problem}")
    runner = str(folder / own_node) if own_node else node
    snippets = docs_snippets(tmp_path_factory.mktemp("ui-snippets"))
    done = subprocess.run(
        [runner, "clients.mjs", ui_server, str(snippets)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["node"] = subprocess.run(
        [runner, "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return result


def test_each_setup_runs_its_node_and_ai_major(
    clients: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    setup = request.node.callspec.params["clients"]
    node_major = setup.split("-")[0].removeprefix("node")
    assert clients["node"].startswith(f"v{node_major}."), clients["node"]


def assistant_text(messages: list[dict[str, Any]]) -> str:
    return "".join(m.get("content") or "" for m in messages if m["role"] == "assistant")


def test_ag_ui_text(clients: dict[str, Any]) -> None:
    text = clients["agui"]["text"]
    assert assistant_text(text["messages"]) == "You said: hello there. " + STORY
    assert text["events"][0] == "RUN_STARTED" and text["events"][-1] == "RUN_FINISHED"


def test_ag_ui_tool_round_trip(clients: dict[str, Any]) -> None:
    messages = clients["agui"]["tool"]["messages"]
    call = next(m for m in messages if m.get("toolCalls"))["toolCalls"][0]
    assert call["function"]["name"] == "weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Porto"}
    result = next(m for m in messages if m["role"] == "tool")
    assert result["toolCallId"] == call["id"] and result["content"] == "Sunny and 21 °C in Porto."
    assert messages[-1]["content"] == WEATHER


def test_ag_ui_text_and_tool_call_are_one_assistant_message(clients: dict[str, Any]) -> None:
    messages = clients["agui"]["textAndTool"]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    first = messages[1]
    assert first["content"] == "Let me look that up."
    (call,) = first["toolCalls"]
    assert call["function"]["name"] == "weather"
    assert messages[2]["toolCallId"] == call["id"]
    assert messages[3]["content"] == WEATHER


def test_ag_ui_front_end_tool(clients: dict[str, Any]) -> None:
    frontend = clients["agui"]["frontend"]
    assert frontend["call"]["function"]["name"] == "pick_colour"
    assert frontend["messages"][-1]["content"].startswith("Done: blue")


def test_ag_ui_approval(clients: dict[str, Any]) -> None:
    approval = clients["agui"]["approval"]
    assert approval["interrupt"]["toolCallId"] == "call-delete_file"
    results = [m for m in approval["messages"] if m["role"] == "tool"]
    assert [r["content"] for r in results] == ["Deleted notes.txt."]
    assert approval["messages"][-1]["content"].startswith("Done: Deleted notes.txt.")


def test_ag_ui_resume_mid_answer(clients: dict[str, Any]) -> None:
    resume = clients["agui"]["resume"]
    full = "You said: tell me a story. " + STORY
    assert resume["lastId"] is not None
    assert 0 < len(resume["partial"]) < len(full) and full.startswith(resume["partial"])
    answers = [m for m in resume["messages"] if m["role"] == "assistant"]
    assert len(answers) == 1 and answers[0]["content"] == full


def test_ag_ui_state(clients: dict[str, Any]) -> None:
    state = clients["agui"]["state"]
    assert state["state"] == {"todos": ["call mum", "buy milk"]}
    assert state["kinds"] == ["STATE_SNAPSHOT", "STATE_DELTA"]
    # HttpAgent sends `state: {}` when the page has none: no snapshot of nothing
    assert "STATE_SNAPSHOT" not in clients["agui"]["text"]["events"]


def parts(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"] == kind]


def test_vercel_text_and_tool(clients: dict[str, Any]) -> None:
    text = clients["vercel"]["text"]
    assert [p["text"] for p in parts(text, "text")] == ["You said: hello there. " + STORY]
    tool = clients["vercel"]["tool"]
    (weather,) = parts(tool, "tool-weather")
    assert weather["state"] == "output-available" and weather["input"] == {"city": "Porto"}
    assert weather["output"] == "Sunny and 21 °C in Porto."
    assert [p["text"] for p in parts(tool, "text")] == [WEATHER]
    assert len(parts(tool, "step-start")) == 2


def test_vercel_sources(clients: dict[str, Any]) -> None:
    """An answer's cited web pages reach useChat's message as ``source-url`` parts."""
    cited = clients["vercel"]["sources"]
    assert [p["text"] for p in parts(cited, "text")] == [CITED]
    assert [(p["url"], p.get("title")) for p in parts(cited, "source-url")] == [
        ("https://news.example.org/first-flush-2026", "An early first flush"),
        ("https://tea.example.com/harvest", None),
    ]


def test_vercel_approval(clients: dict[str, Any]) -> None:
    approval = clients["vercel"]["approval"]
    (asked,) = parts(approval["first"], "tool-delete_file")
    assert asked["state"] == "approval-requested"
    (done,) = parts(approval["second"], "tool-delete_file")
    assert done["state"] == "output-available" and done["output"] == "Deleted notes.txt."
    assert approval["second"]["id"] == approval["first"]["id"]


def test_vercel_client_side_tool(clients: dict[str, Any]) -> None:
    client_tool = clients["vercel"]["clientTool"]
    (call,) = parts(client_tool["first"], "tool-pick_colour")
    assert call["state"] == "input-available" and call["input"] == {"options": ["red", "blue"]}
    assert parts(client_tool["second"], "text")[0]["text"].startswith("Done: blue")


def test_vercel_resume_mid_answer(clients: dict[str, Any]) -> None:
    resume = clients["vercel"]["resume"]
    full = "You said: tell me a story. " + STORY
    partial = parts(resume["partial"], "text")[0]
    assert (
        partial["state"] == "streaming"
        and full.startswith(partial["text"])
        and partial["text"] != full
    )
    assert resume["resumed"] is not None
    assert [p["text"] for p in parts(resume["resumed"], "text")] == [full]
    assert resume["resumed"]["id"] == resume["partial"]["id"]


def recipe_text(clients: dict[str, Any]) -> str:
    return "You said: tell me a story. " + STORY


def test_an_unguarded_ag_ui_client_leaks_an_unhandled_rejection(clients: dict[str, Any]) -> None:
    """What docs/ui.md warns about (@ag-ui/client 1.0): a dropped socket fails the run and
    also escapes as an unhandled rejection, which ends a Node process by default."""
    unguarded = clients["recipes"]["unguarded"]
    assert unguarded["error"] is not None and "terminated" in unguarded["error"]
    assert unguarded["unhandled"], "the warning in docs/ui.md may be out of date"


def test_the_ag_ui_resume_recipe_survives_dropped_connections(clients: dict[str, Any]) -> None:
    agui = clients["recipes"]["agui"]
    assert agui["drops"] == 2 and agui["unhandled"] == []
    assert agui["lastEventId"] is not None and "Last-Event-ID" not in agui["headers"]
    answers = [m for m in agui["messages"] if m["role"] == "assistant"]
    assert len(answers) == 1 and answers[0]["content"] == recipe_text(clients)


def test_the_ai_sdk_resume_recipe_survives_dropped_connections(clients: dict[str, Any]) -> None:
    vercel = clients["recipes"]["vercel"]
    assert vercel["drops"] == 2 and vercel["unhandled"] == []
    message = vercel["message"]
    assert [p["text"] for p in parts(message, "text")] == [recipe_text(clients)]
    assert parts(message, "text")[0]["state"] == "done"


PDF_SIZE = len(b"%PDF-1.7\n1 0 obj <</Type /Page>> endobj\n")


def test_ag_ui_files_in_and_a_tools_image_out(clients: dict[str, Any]) -> None:
    files = clients["agui"]["files"]
    answer = files["messages"][-1]["content"]
    assert answer.startswith(f"You attached report.pdf (application/pdf, {PDF_SIZE} bytes).")
    result = next(m for m in files["chart"] if m["role"] == "tool")
    text, image = result["content"]  # the client kept the parts as treadle sent them
    assert text == {"type": "text", "text": "Sales for this week:"}
    assert image["type"] == "image" and image["metadata"] == {"filename": "sales.png"}
    assert image["source"]["type"] == "data" and image["source"]["mimeType"] == "image/png"


def test_vercel_files_in_and_a_tools_image_out(clients: dict[str, Any]) -> None:
    read = clients["vercel"]["files"]["read"]
    assert parts(read, "text")[0]["text"].startswith(
        f"You attached report.pdf (application/pdf, {PDF_SIZE} bytes)."
    )
    chart = clients["vercel"]["files"]["chart"]
    (image,) = parts(chart, "file")
    assert image["mediaType"] == "image/png" and image["url"].startswith("data:image/png;base64,")
    assert image["providerMetadata"] == {"treadle": {"filename": "sales.png"}}
    kinds = [p["type"] for p in chart["parts"]]
    assert kinds.index("file") == kinds.index("tool-chart") + 1  # after the tool's output

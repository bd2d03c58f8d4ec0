"""treadle in a real Jupyter kernel (ipykernel, driven by jupyter_client as a notebook
front end drives it): a run's result shows as a rich display object, and the interrupt
button stops a ``run_sync`` in progress (its worker thread included)."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("ipykernel", reason="the dev extra installs ipykernel")
jupyter_client = pytest.importorskip("jupyter_client", reason="the dev extra installs it")

pytestmark = pytest.mark.slow

SETUP = """
from treadle import Agent, AssistantMessage, ToolCall, tool
from treadle.testing import ScriptedProvider

@tool
def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b

call = AssistantMessage(content=[ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})])
agent = Agent(ScriptedProvider([call, "It is <b>5</b>."]), tools=[add])
slow = Agent(ScriptedProvider(["word " * 400, "again"], chunks=400, delay=0.05))
"""


@pytest.fixture(scope="module")
def kernel() -> Iterator[Any]:
    manager, client = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        yield manager, client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def execute(client: Any, code: str, timeout: float = 60) -> list[dict[str, Any]]:
    """Run ``code`` in the kernel; the IOPub messages of that execution, until idle."""
    msg_id = client.execute(code)
    outputs: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            msg = client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no answer from the kernel; so far: {outputs}") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return outputs
        outputs.append(msg)


def test_a_result_shows_its_answer_tool_calls_and_usage(kernel: Any) -> None:
    _, client = kernel
    execute(client, SETUP)
    outputs = execute(client, 'agent.run_sync("2 + 3?")')
    shown = [m["content"]["data"] for m in outputs if m["msg_type"] == "execute_result"]
    assert shown, outputs
    data = shown[0]
    assert "It is &lt;b&gt;5&lt;/b&gt;." in data["text/html"]  # escaped: model text is untrusted
    assert "<code>add({&quot;a&quot;: 2, &quot;b&quot;: 3})</code>" in data["text/html"]
    plain = data["text/plain"]
    assert plain.startswith("It is <b>5</b>.")
    assert '→ add({"a": 2, "b": 3}) = 5' in plain and "ended: completed" in plain


def test_the_interrupt_button_stops_run_sync(kernel: Any) -> None:
    manager, client = kernel
    execute(client, SETUP)
    msg_id = client.execute('slow.run_sync("write a long answer")')
    time.sleep(1.5)  # the run is streaming (about 20 s in all)
    manager.interrupt_kernel()
    errors: list[dict[str, Any]] = []
    while True:
        msg = client.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "error":
            errors.append(msg["content"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    assert errors and errors[0]["ename"] == "KeyboardInterrupt", errors
    assert errors[0]["evalue"].startswith("treadle: interrupted")
    outputs = execute(
        client,
        "print(slow.running, [getattr(m, 'stop_reason', None) for m in slow.messages]);"
        "print(slow.run_sync('next').text)",
    )
    text = "".join(m["content"].get("text", "") for m in outputs if m["msg_type"] == "stream")
    assert "False [None, 'aborted']" in text, outputs
    assert "again" in text


def test_a_stream_shows_live_in_one_display(kernel: Any) -> None:
    _, client = kernel
    execute(client, SETUP)
    code = (
        "chatty = Agent(ScriptedProvider([call, 'The sum is five.'], chunks=4, delay=0.01),"
        " tools=[add])\n"
        "async with chatty.stream('2 + 3?') as events:\n"
        "    shown = await events.show()\n"
    )
    outputs = execute(client, code)
    kinds = [m["msg_type"] for m in outputs]
    assert kinds.count("display_data") == 1, kinds  # one display, updated in place
    updates = [
        m["content"]["data"]["text/html"] for m in outputs if m["msg_type"] == "update_display_data"
    ]
    assert any("→ add(" in u for u in updates)  # the tool call while it ran
    assert "The sum is five." in updates[-1] and "ended: completed" in updates[-1]

"""A tool that asks a person mid-call (``ApprovalRequired``), offline.

A payment tool pays small amounts at once; over a limit it asks first, saving the quote it
got, and the run suspends. A person approves; the tool is called again with
``ctx.approved`` and its saved quote, and the run goes on. A second payment is denied: the
tool is not called again and the model reads the refusal.

Run: ``python examples/ask_mid_call.py``
"""

from __future__ import annotations

from typing import Any

from treadle import Agent, AssistantMessage, ToolCall, ToolContext, tool
from treadle.testing import ScriptedProvider
from treadle.tools import ApprovalRequired

LIMIT = 100
quotes = iter(range(1, 100))


@tool
def pay(amount: int, ctx: ToolContext[Any]) -> str:
    """Pay an amount (a person approves anything over the limit)."""
    if ctx.approved and ctx.saved:
        return f"paid {amount} at quote {ctx.saved['quote']}"
    if amount > LIMIT:
        quote = next(quotes)  # work done before asking, kept for the approved call
        raise ApprovalRequired(f"Pay {amount} (quote {quote})?", saved={"quote": quote})
    return f"paid {amount}"


def calls(*amounts: int) -> AssistantMessage:
    return AssistantMessage(
        content=[ToolCall(id=f"pay-{a}", name="pay", arguments={"amount": a}) for a in amounts]
    )


def main() -> list[str]:
    model = ScriptedProvider([calls(40, 500), "Paid both.", calls(900), "Not paid."])
    agent = Agent(model, tools=[pay])
    lines: list[str] = []

    first = agent.run_sync("Pay the two invoices.")
    for call_id in first.pending_tool_calls:
        lines.append(f"asked: {agent.context.suspended[call_id].prompt}")
        agent.context.approve(call_id)
    second = agent.continue_sync()
    lines.append(f"{second.reason}: {second.text}")

    third = agent.run_sync("And the big one.")
    for call_id in third.pending_tool_calls:
        lines.append(f"asked: {agent.context.suspended[call_id].prompt}")
        agent.context.deny(call_id, "Too much this month.")
    fourth = agent.continue_sync()
    lines.append(f"{fourth.reason}: {fourth.text}")
    results = [m.text for m in agent.messages if m.role == "tool_result"]
    lines.extend(f"result: {text}" for text in results)
    return lines


if __name__ == "__main__":
    print("offline: a scripted model, no key needed")
    out = main()
    for line in out:
        print(line)
    assert out[-2:] == ["result: paid 500 at quote 1", "result: Too much this month."]

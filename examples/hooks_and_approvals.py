"""Hooks, an input filter and an approval gate: a run that suspends, then resumes.

``delete_file`` needs a person's approval. Without an approval handler the run ends
``suspended``; we approve and continue with ``agent_loop_continue``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import anyio

from treadle import (
    AgentContext,
    AgentLoopConfig,
    Allow,
    Ask,
    AssistantMessage,
    Hooks,
    RunHandle,
    TextContent,
    ToolCall,
    agent_loop,
    agent_loop_continue,
    tool,
)
from treadle.context import validate_transcript
from treadle.loop import InputFilter, Pass, Reject
from treadle.providers import Provider, get_provider
from treadle.testing import ScriptedProvider, ScriptItem


def model_or_script(script: Sequence[ScriptItem]) -> Provider:
    """The model named by ``TREADLE_MODEL``; without one, a ScriptedProvider playing
    ``script`` (what a real model would plausibly answer), announced as offline: the
    example runs as it is, with no key and no network."""
    spec = os.environ.get("TREADLE_MODEL")
    if spec:
        return get_provider(spec)
    print("(offline: scripted model answers; set TREADLE_MODEL to use a real one)")
    return ScriptedProvider(script, name="offline", model="offline-script", delay=0.002)


@tool(category="edit")
def delete_file(path: str) -> str:
    """Delete a file (pretend)."""
    return f"deleted {path}"


@tool(category="info")
def list_files() -> list[str]:
    """List the files in the project."""
    return ["notes.txt", "old.log"]


class Guard(Hooks):
    """Reading is fine; deleting needs a person."""

    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Allow | Ask:
        if call.name == "delete_file":
            return Ask(prompt=f"Delete {call.arguments.get('path')}?")
        return Allow()

    async def after_turn(self, run: RunHandle, event: object) -> None:
        print(f"  (turn done, {len(run.context.messages)} messages)")


class NoPasswords(InputFilter):
    def filter(self, text: str) -> Pass | Reject:
        return Reject("please do not paste passwords") if "password" in text else Pass()


async def main() -> None:
    provider = model_or_script(
        [
            AssistantMessage(content=[ToolCall(id="c1", name="list_files", arguments={})]),
            AssistantMessage(
                content=[ToolCall(id="c2", name="delete_file", arguments={"path": "old.log"})]
            ),
            AssistantMessage(content=[TextContent(text="Deleted old.log.")]),
        ]
    )
    context = AgentContext(system_prompt="Tidy the project.", tools=[delete_file, list_files])
    config = AgentLoopConfig(provider=provider, hooks=[Guard()], input_filters=[NoPasswords()])

    rejected = await agent_loop(["my password is hunter2"], AgentContext(), config)
    print("filtered prompt added", len(rejected), "messages")

    await agent_loop(["Remove the old log file."], context, config)
    pending = context.pending_tool_calls
    assert validate_transcript(context.messages, allow_pending=pending) == []
    if not pending:  # a real model may answer without trying to delete anything
        print("no approval was needed; the model said:", getattr(context.messages[-1], "text", ""))
        return
    print("suspended, waiting for:", pending)
    for call_id in pending:
        context.approve(call_id)  # a person said yes
    await agent_loop_continue(context, config)
    print("final:", getattr(context.messages[-1], "text", ""))
    assert validate_transcript(context.messages) == []


if __name__ == "__main__":
    anyio.run(main)

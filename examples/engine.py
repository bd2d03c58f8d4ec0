"""Engine features from ``treadle.ext``, all at once, carried over between two processes.

Run it with ``python examples/engine.py``. It starts two processes one after the other,
sharing a folder of skills and a folder of SQLite files. Each builds the same agent with
``treadle.ext.engine(db=...)``, which makes every extension in one call — memory recall and
the user-memory message, the skill router and auto-skills, plan mode, MCP tool curation,
style hints, request-shape routing and the long cache tier, the workflow gate, a post-run
compression worker and a session-end hook — with the hooks in the order they must run.
Profiles (a persona and switchable ways of working) go on top.

1. The first process's agent is told the user's name; the model saves it with the
   ``remember`` tool. The skill router picks a skill (a hint line in the system prompt) and
   credits it as the run completes; the style hook records how the user writes; the
   compression worker summarises the run into the memory store (a ``custom`` event just
   before ``agent_end``); the session-end hook reports the reason. Each request's route
   (its tool count, token estimate and chosen model) is a ``treadle.ext.route`` event,
   and the run's usage is split per model in ``result.usage_by_model``.
2. The second process starts a new conversation. Its first request carries what memory
   recalled (the saved fact and the first run's summary) and a style hint built from the
   first process's observation; the router starts from the arms the first process left.
   Then ``/status`` is answered by the workflow gate without the model.

Offline (no ``TREADLE_MODEL``) the model is scripted; with a real model the answers vary.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import anyio

from treadle import AssistantMessage, ModelRequest, TextContent, ToolCall, ToolResultMessage
from treadle.agent import Profile
from treadle.ext import engine
from treadle.ext.memory import RECALL_HEADER
from treadle.ext.profiles import Profiles
from treadle.ext.routing import ROUTE_EVENT
from treadle.ext.workers import SUMMARY_EVENT, SUMMARY_INSTRUCTION, SessionEndInfo
from treadle.providers import Provider, get_provider
from treadle.testing import ScriptedProvider, ScriptItem
from treadle.types import CustomEvent


def model_or_script(script: Sequence[ScriptItem]) -> Provider:
    """The model named by ``TREADLE_MODEL``; without one, a ScriptedProvider playing
    ``script`` (what a real model would plausibly answer), announced as offline: the
    example runs as it is, with no key and no network."""
    spec = os.environ.get("TREADLE_MODEL")
    if spec:
        return get_provider(spec)
    print("(offline: scripted model answers; set TREADLE_MODEL to use a real one)")
    return ScriptedProvider(script, name="offline", model="offline-script", delay=0.002)


SKILLS = {
    "release-notes": "Write release notes from a list of merged changes.",
    "greeting": "Greet people warmly and use their name.",
}


def text(answer: str) -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text=answer)])


def offline_model(request: ModelRequest) -> AssistantMessage:
    """What the scripted model says: a summary when the compression worker asks, the
    remember call for a new name, and answers from what memory put in the request."""
    if request.system_prompt and SUMMARY_INSTRUCTION in request.system_prompt:
        return text("Ada introduced herself and asked the assistant to remember her name.")
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        return text("Nice to meet you, Ada! I will remember your name.")
    if "remember my name" in last.text:  # type: ignore[union-attr]
        fact = {"fact": "The user's name is Ada."}
        return AssistantMessage(content=[ToolCall(id="call-1", name="remember", arguments=fact)])
    for message in request.messages:
        if RECALL_HEADER in getattr(message, "text", ""):
            fact = message.text.splitlines()[1].lstrip("- ")  # type: ignore[union-attr]
            return text(f"From memory: {fact}")
    return text("I do not know your name yet.")


def gate(prompt: str) -> str | None:
    """The workflow gate answers ``/status`` itself; everything else goes to the model."""
    return "All systems go (answered by the workflow gate)." if prompt == "/status" else None


async def child(folder: Path, step: int) -> None:
    ended: list[str] = []

    def on_end(info: SessionEndInfo) -> None:
        ended.append(info.reason)

    model = model_or_script([offline_model] * 6)  # type: ignore[list-item]
    parts = engine(
        db=folder / "engine",
        skills=folder / "skills",
        user_id="ada",
        cheap=model,  # a real app: a cheaper model for short tool-free requests
        gate=gate,
        on_session_end=on_end,
        seed=step + 1,
    )
    assert parts.memory is not None and parts.router is not None and parts.users is not None
    assert parts.plan is not None
    profiles = Profiles(
        [
            Profile("assistant", "Help the user; remember facts.", tools=parts.tools),
            Profile("planner", "Plan before changing anything.", tools=parts.plan.tools),
        ],
        persona="You are the treadle engine demo.",
    )
    agent = profiles.agent(parts.wrap(model), hooks=parts.hooks)
    arms, users, store = parts.router.arms, parts.users, parts.memory
    print(f"[process {step}] hooks, in order: {[type(h).__name__ for h in parts.hooks]}")
    print(f"[process {step}] arms before: {arms.all() or 'none yet'}")
    observed = users.profile("ada")
    print(f"[process {step}] style observations before: {observed.observations if observed else 0}")
    prompt = "Hi, I am Ada. Please remember my name." if step == 1 else "What is my name?"
    async with agent.stream(prompt) as events:
        custom = [e async for e in events if isinstance(e, CustomEvent)]
    result = events.result
    assert result is not None
    print(f"[process {step}] skill picked: {parts.router.pick.name if parts.router.pick else None}")
    print(f"[process {step}] {prompt!r} -> {result.text!r} ({result.reason})")
    for event in custom:
        if event.name == ROUTE_EVENT:
            route = event.value
            print(f"[process {step}] route: {route['route']} ({route['model']}), "
                  f"{route['tools']} tools, ~{route['tokens']} tokens")  # fmt: skip
        elif event.name == SUMMARY_EVENT:
            print(f"[process {step}] post-run summary: {event.value.get('summary')!r}")
    by_model = {name: u.total_tokens for name, u in result.usage_by_model.items()}
    print(f"[process {step}] tokens per model: {by_model}")
    print(f"[process {step}] facts stored: {[f.text for f in store.facts()]}")
    print(f"[process {step}] arms after: {arms.all()}")
    profile = users.profile("ada")
    print(f"[process {step}] style: {profile.hint() if profile else None}")
    print(f"[process {step}] session end hooks saw: {ended}")
    if step == 2:
        status = await agent.run("/status")
        print(f"[process {step}] '/status' -> {status.text!r}")
    parts.close()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, description in SKILLS.items():
            skill = folder / "skills" / name / "SKILL.md"
            skill.parent.mkdir(parents=True)
            skill.write_text(f"---\nname: {name}\ndescription: {description}\n---\nSteps ...\n")
        for step in (1, 2):
            command = [sys.executable, __file__, "--child", tmp, str(step)]
            done = subprocess.run(command, capture_output=True, text=True)
            print(done.stdout, end="")
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                sys.exit(done.returncode)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        anyio.run(child, Path(sys.argv[2]), int(sys.argv[3]))
    else:
        main()

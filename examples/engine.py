"""Engine features from ``treadle.ext``: memory and skills carried over between processes.

Run it with ``python examples/engine.py``. It starts two processes one after the other,
sharing a folder of skills and two SQLite files:

1. The first process's agent is told the user's name; the model saves it with the
   ``remember`` tool. The skill router picks a skill for the run (a hint line in the system
   prompt) and, as the run completes, credits that skill's arm.
2. The second process starts a new conversation. Before its first model call the memory
   hook finds the saved fact and puts it in front of the request, so the model answers from
   it; the router starts from the arms the first process left.

Offline (no ``TREADLE_MODEL``) the model is scripted; with a real model the answers vary.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
from _model import model_or_script

from treadle import Agent, AssistantMessage, ModelRequest, TextContent, ToolCall, UserMessage
from treadle.ext.memory import RECALL_HEADER, MemoryRecall, MemoryStore
from treadle.ext.skills import SkillArms, SkillRouter

SKILLS = {
    "release-notes": "Write release notes from a list of merged changes.",
    "greeting": "Greet people warmly and use their name.",
}


def answer_from_memory(request: ModelRequest) -> AssistantMessage:
    """What the offline model says in the second process: it reads the recalled block."""
    first = request.messages[0]
    recalled = first.text if isinstance(first, UserMessage) else ""
    if RECALL_HEADER in recalled:
        fact = recalled.splitlines()[1].lstrip("- ")
        return AssistantMessage(content=[TextContent(text=f"From memory: {fact}")])
    return AssistantMessage(content=[TextContent(text="I do not know your name yet.")])


async def child(folder: Path, step: int) -> None:
    store = MemoryStore(folder / "memory.db")
    arms = SkillArms(folder / "skills.db")
    router = SkillRouter(folder / "skills", arms, seed=step + 1)
    print(f"[process {step}] arms before: {arms.all() or 'none yet'}")
    if step == 1:
        remember = ToolCall(
            id="call-1", name="remember", arguments={"fact": "The user's name is Ada."}
        )
        script: list[object] = [AssistantMessage(content=[remember]), "Nice to meet you, Ada!"]
        prompt = "Hi, I am Ada. Please remember my name."
    else:
        script = [answer_from_memory]
        prompt = "What is my name?"
    agent = Agent(
        model_or_script(script),  # type: ignore[arg-type]
        tools=[store.remember_tool(), router.read_skill_tool()],
        hooks=[MemoryRecall(store), router],
        system_prompt="You are a helpful assistant.",
    )
    result = await agent.run(prompt)
    print(f"[process {step}] skill picked: {router.pick.name if router.pick else None}")
    print(f"[process {step}] {prompt!r} -> {result.text!r} ({result.reason})")
    print(f"[process {step}] facts stored: {[f.text for f in store.facts()]}")
    print(f"[process {step}] arms after: {arms.all()}")


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

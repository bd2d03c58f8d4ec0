"""Extension footprint: turns of an offline agent with no extensions vs with the
``treadle.ext`` hooks installed but idle.

Idle means: nothing to recall (an empty memory store), no MCP tools to curate, plan mode
off, a user model with no history yet, a small skill catalog the router picks from. Each
run is a fresh conversation of two turns (a tool call, then the answer) against a scripted
model, so the figures are treadle's own cost per turn, no network. Variants run
interleaved (the machine is noisy) and the median per turn is reported.

    python benchmarks/ext_overhead.py [--reps 7] [--runs 200]

Runs from a plain clone: ``src/`` is put on the path when treadle is not installed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
try:
    import treadle  # noqa: F401
except ImportError:  # a plain clone
    sys.path.insert(0, str(HERE.parent / "src"))

import anyio  # noqa: E402

from treadle import Agent, AssistantMessage, ToolCall, tool  # noqa: E402
from treadle.ext.mcp_curation import McpCuration  # noqa: E402
from treadle.ext.memory import MemoryRecall, MemoryStore, UserMemory  # noqa: E402
from treadle.ext.plan_mode import PlanMode  # noqa: E402
from treadle.ext.skills import SkillArms, SkillRouter  # noqa: E402
from treadle.ext.style import SqliteUserModel, StyleHints  # noqa: E402
from treadle.testing import ScriptedProvider  # noqa: E402

TURNS_PER_RUN = 2
PROMPT = "Please look up the weather in Lisbon and tell me if I need an umbrella."


@tool(category="info")
def lookup(city: str) -> str:
    """Look up the weather.

    Args:
        city: the city
    """
    return f"Sunny in {city}."


def script(runs: int) -> list[Any]:
    call = ToolCall(id="c1", name="lookup", arguments={"city": "Lisbon"})
    return [AssistantMessage(content=[call]), "No umbrella needed."] * runs


def make_agent(variant: str, runs: int, folder: Path) -> Agent[Any]:
    model = ScriptedProvider(script(runs))
    if variant == "bare":
        return Agent(model, tools=[lookup], system_prompt="You are helpful.")
    store = MemoryStore(folder / "memory.db")  # empty: nothing to recall
    router = SkillRouter(folder / "skills", SkillArms(folder / "skills.db"), seed=1)
    plan = PlanMode()
    hooks = [
        MemoryRecall(store),
        UserMemory(store),
        router,
        plan,
        McpCuration(folder / "audit.db"),
        StyleHints(SqliteUserModel(folder / "users.db"), user_id="bench"),
    ]
    tools = [lookup, *plan.tools, store.remember_tool(), router.read_skill_tool()]
    return Agent(model, tools=tools, hooks=hooks, system_prompt="You are helpful.")


def prepare(folder: Path) -> None:
    for name in ("weather", "release-notes", "travel"):
        skill = folder / "skills" / name / "SKILL.md"
        skill.parent.mkdir(parents=True, exist_ok=True)
        skill.write_text(f"---\nname: {name}\ndescription: Help with {name}.\n---\nSteps.\n")


async def time_variant(variant: str, runs: int, folder: Path) -> float:
    """Seconds per turn over ``runs`` fresh two-turn conversations (after a warm-up)."""
    agent = make_agent(variant, runs + 5, folder)
    for _ in range(5):
        await agent.run(PROMPT)
        agent.reset()
    started = time.perf_counter()
    for _ in range(runs):
        result = await agent.run(PROMPT)
        assert result.reason == "completed", result.error
        agent.reset()
    return (time.perf_counter() - started) / (runs * TURNS_PER_RUN)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7, help="interleaved repetitions")
    parser.add_argument("--runs", type=int, default=200, help="conversations per repetition")
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    opts = parser.parse_args()
    figures: dict[str, list[float]] = {"bare": [], "extensions": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        prepare(folder)
        for _ in range(opts.reps):
            for variant in figures:
                per_turn = anyio.run(time_variant, variant, opts.runs, folder, backend=opts.backend)
                figures[variant].append(per_turn)
    bare = statistics.median(figures["bare"])
    ext = statistics.median(figures["extensions"])
    print(f"python {sys.version.split()[0]}, {opts.backend}, {os.cpu_count()} CPUs")
    print(f"{opts.reps} reps x {opts.runs} conversations x {TURNS_PER_RUN} turns")
    print(f"bare agent:           {bare * 1e6:8.1f} us/turn (median)")
    print(f"extensions, idle:     {ext * 1e6:8.1f} us/turn (median)")
    print(f"overhead:             {(ext / bare - 1) * 100:+8.1f} %  (target <= 5 %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

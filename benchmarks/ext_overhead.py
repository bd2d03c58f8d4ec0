"""Extension footprint: turns of an agent with no extensions vs with the ``treadle.ext``
hooks installed but idle, in two setups.

Idle means: nothing to recall (an empty memory store), no MCP tools to curate, plan mode
off, a user model with no history yet, a small skill catalog the router picks from. Each
run is a fresh conversation. The two agents take turns, conversation by conversation, so
that other work on a shared machine hits both alike; per repetition each variant's median
conversation gives its cost per turn, and the overhead is the median over repetitions of
the ratio of the two.

- ``http`` (what the issue's target is measured on): the setup of ``loop_overhead.py``.
  The benchmark kit's fake OpenAI server (``benchmarks/kit/fake_llm.py``, another
  process, on a free loopback port) and ``OpenAIChat`` streaming its scenario: ``add(2,
  3)``, one more ``add``, then a 200-token answer — three turns a run, over real HTTP and
  SSE, so the figures are a realistic per-turn cost with no model latency. Wall time and
  this process's CPU per turn.
- ``scripted``: a scripted model in-process (a tool call, then the answer: two turns),
  no network — treadle's own cost per turn, the harshest ratio.

    python benchmarks/ext_overhead.py [--setup both|http|scripted] [--reps 5] [--runs 300]

Runs from a plain clone: ``src/`` is put on the path when treadle is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
KIT = HERE / "kit"
try:
    import treadle  # noqa: F401
except ImportError:  # a plain clone
    sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(KIT))

import anyio  # noqa: E402
from fake_llm import final_text  # type: ignore[import-not-found]  # noqa: E402
from fake_server import KIT_SERVER, fake_server  # noqa: E402  (benchmarks/, beside this script)

from treadle import Agent, AssistantMessage, ToolCall, tool  # noqa: E402
from treadle.ext.mcp_curation import McpCuration  # noqa: E402
from treadle.ext.memory import MemoryRecall, MemoryStore, UserMemory  # noqa: E402
from treadle.ext.plan_mode import PlanMode  # noqa: E402
from treadle.ext.skills import SkillArms, SkillRouter  # noqa: E402
from treadle.ext.style import SqliteUserModel, StyleHints  # noqa: E402
from treadle.providers import OpenAIChat  # noqa: E402
from treadle.testing import ScriptedProvider  # noqa: E402

TURNS = {"scripted": 2, "http": 3}
VARIANTS = ("bare", "extensions")
PROMPTS = {
    "scripted": "Please look up the weather in Lisbon and tell me if I need an umbrella.",
    "http": "What is 2 + 3? Use the add tool.",  # the kit's prompt (benchmarks/kit/common.py)
}
INSTRUCTIONS = "You are a calculator. Always use the add tool to add numbers."
FINAL_TOKENS = 200


@tool(category="info")
def lookup(city: str) -> str:
    """Look up the weather.

    Args:
        city: the city
    """
    return f"Sunny in {city}."


@tool(description="Add two integers and return their sum.")
def add(a: int, b: int) -> int:
    return a + b


def script(runs: int) -> list[Any]:
    call = ToolCall(id="c1", name="lookup", arguments={"city": "Lisbon"})
    return [AssistantMessage(content=[call]), "No umbrella needed."] * runs


def make_agent(setup: str, variant: str, runs: int, folder: Path, base_url: str) -> Agent[Any]:
    if setup == "http":
        model: Any = OpenAIChat("fake-sequential", base_url=base_url, api_key="sk-fake")
        tools: list[Any] = [add]
        system = INSTRUCTIONS
    else:
        model, tools, system = ScriptedProvider(script(runs)), [lookup], "You are helpful."
    if variant == "bare":
        return Agent(model, tools=tools, system_prompt=system)
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
    tools += [*plan.tools, store.remember_tool(), router.read_skill_tool()]
    return Agent(model, tools=tools, hooks=hooks, system_prompt=system)


def prepare(folder: Path) -> None:
    for name in ("weather", "release-notes", "travel"):
        skill = folder / "skills" / name / "SKILL.md"
        skill.parent.mkdir(parents=True, exist_ok=True)
        skill.write_text(f"---\nname: {name}\ndescription: Help with {name}.\n---\nSteps.\n")


async def time_pair(
    setup: str, runs: int, folder: Path, base_url: str
) -> dict[str, list[tuple[float, float]]]:
    """Per variant, (wall, CPU) seconds of each of ``runs`` fresh conversations, the two
    agents taking turns conversation by conversation (after a warm-up), so that other
    work on the machine hits both alike."""
    agents = {v: make_agent(setup, v, runs + 5, folder, base_url) for v in VARIANTS}
    prompt, expected = PROMPTS[setup], final_text(FINAL_TOKENS) if setup == "http" else None
    times: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    try:
        for i in range(runs + 5):
            for variant, agent in agents.items():
                cpu, started = time.process_time(), time.perf_counter()
                result = await agent.run(prompt)
                wall, cpu = time.perf_counter() - started, time.process_time() - cpu
                assert result.reason == "completed", result.error
                assert expected is None or result.text == expected, result.text[:80]
                agent.reset()
                if i >= 5:
                    times[variant].append((wall, cpu))
    finally:
        for agent in agents.values():
            await agent.aclose()
    return times


# ---- the fake server ----


def get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as response:
        found: dict[str, Any] = json.loads(response.read())
        return found


@contextmanager
def checked_server() -> Iterator[str]:
    """The kit's fake server (``fake_server.py``); at the end, checks it saw no wrong
    request."""
    with fake_server(KIT_SERVER, "--final-tokens", str(FINAL_TOKENS)) as root:
        yield root
        stats = get_json(root + "/stats")
        if stats.get("final_bad") or stats.get("errors"):
            raise SystemExit(f"the fake server saw wrong requests: {stats}")


def measure(setup: str, opts: argparse.Namespace, folder: Path, root: str) -> dict[str, Any]:
    """Medians per turn, and the overhead: the median over repetitions of the ratio of
    the two variants' median conversations (robust to the spikes of a shared machine)."""
    per_turn: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    for _ in range(opts.reps):
        args = (setup, opts.runs, folder, root + "/v1")
        times = anyio.run(time_pair, *args, backend=opts.backend)
        for variant, found in times.items():
            wall = statistics.median(w for w, _ in found) / TURNS[setup]
            cpu = statistics.median(c for _, c in found) / TURNS[setup]
            per_turn[variant].append((wall, cpu))
    out: dict[str, Any] = {}
    for variant, figures in per_turn.items():
        out[variant] = statistics.median(w for w, _ in figures)
        out[variant + "_cpu"] = statistics.median(c for _, c in figures)
    pairs = list(zip(per_turn["extensions"], per_turn["bare"], strict=True))
    out["ratio"] = statistics.median(e[0] / b[0] for e, b in pairs)
    out["ratio_cpu"] = statistics.median(e[1] / b[1] for e, b in pairs)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", default="both", choices=["both", "http", "scripted"])
    parser.add_argument("--reps", type=int, default=5, help="repetitions")
    parser.add_argument("--runs", type=int, default=300, help="conversations per variant and rep")
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    opts = parser.parse_args()
    setups = ["http", "scripted"] if opts.setup == "both" else [opts.setup]
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        prepare(folder)
        for setup in setups:
            if setup == "http":
                with checked_server() as root:
                    results[setup] = measure(setup, opts, folder, root)
            else:
                results[setup] = measure(setup, opts, folder, "http://unused")
    print(f"python {sys.version.split()[0]}, {opts.backend}, {os.cpu_count()} CPUs")
    print(f"{opts.reps} reps x {opts.runs} conversations a variant, interleaved; per turn:")
    for setup, r in results.items():
        name = "fake HTTP server" if setup == "http" else "scripted model"
        print(f"\n{setup} ({name}, {TURNS[setup]} turns a conversation):")
        print(f"  {'':<18}{'wall us/turn':>13}{'cpu us/turn':>13}")
        for variant in ("bare", "extensions"):
            label = "bare agent" if variant == "bare" else "extensions, idle"
            wall, cpu = r[variant] * 1e6, r[variant + "_cpu"] * 1e6
            print(f"  {label:<18}{wall:>13.1f}{cpu:>13.1f}")
        wall, cpu = (r["ratio"] - 1) * 100, (r["ratio_cpu"] - 1) * 100
        target = "  (target <= 5 %)" if setup == "http" else ""
        print(f"  {'overhead':<18}{wall:>+12.1f}%{cpu:>+12.1f}%{target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""treadle.ext.engine: every extension from one call, its SQLite files in one folder, hooks in the
documented order — and the order's reasons hold: a veto stops the run before the router
draws, plan mode refuses a call before an approval hook is asked, the long cache tier sees
the request after recall and hints were added — on asyncio and trio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from treadle import Ask, AssistantMessage, Hooks, RunHandle, ToolCall, ToolResultMessage, tool
from treadle.ext import Engine, engine
from treadle.ext.auto_skills import AutoSkills
from treadle.ext.mcp_curation import McpCuration
from treadle.ext.memory import RECALL_HEADER, USER_MEMORY_HEADER, MemoryRecall, UserMemory
from treadle.ext.plan_mode import PlanMode
from treadle.ext.routing import ROUTE_EVENT, LongCache, ShapeRouter
from treadle.ext.skills import SkillRouter
from treadle.ext.style import StyleHints
from treadle.ext.workers import SUMMARY_EVENT, PostRunWorkers, SessionEnd
from treadle.ext.workflow import WorkflowGate
from treadle.testing import ScriptedProvider
from treadle.types import CustomEvent

pytestmark = pytest.mark.anyio


@tool(category="edit")
def write_file(path: str) -> str:
    """Write a file."""
    return "written"


class Veto(Hooks):
    async def before_loop(self, run: RunHandle) -> bool:
        return False


class AskEverything(Hooks):
    """An approval policy: every call that may change something needs the user's yes."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Ask | None:
        if call.name in ("enter_plan_mode", "exit_plan_mode"):
            return None
        self.asked.append(call.name)
        return Ask("Allow?")


class Watch(Hooks):
    def __init__(self) -> None:
        self.systems: list[str | None] = []

    async def before_model_request(self, run: RunHandle, request: Any) -> Any:
        self.systems.append(request.system_prompt)
        return request


def skill_folder(root: Path) -> Path:
    skill = root / "skills" / "greeting" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: greeting\ndescription: Greet warmly.\n---\nSay hello.\n")
    return root / "skills"


def call(name: str, **args: Any) -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id=f"c-{name}", name=name, arguments=args)])


def test_the_hooks_come_in_the_documented_order(tmp_path: Path) -> None:
    policy, watch, ended = AskEverything(), Watch(), []
    parts = engine(
        db=tmp_path / "engine",
        skills=skill_folder(tmp_path),
        user_id="ada",
        cheap=ScriptedProvider([]),
        gate=lambda text: None,
        policy=[policy],
        observers=[watch],
        on_session_end=ended.append,
    )
    kinds = [type(h) for h in parts.hooks]
    assert kinds == [
        PlanMode,
        AskEverything,
        McpCuration,
        MemoryRecall,
        UserMemory,
        SkillRouter,
        AutoSkills,
        StyleHints,
        LongCache,
        PostRunWorkers,
        Watch,
        SessionEnd,
    ]
    names = [t.name for t in parts.tools]
    assert names == ["remember", "search_memory", "read_skill", "enter_plan_mode",
                     "exit_plan_mode"]  # fmt: skip
    wrapped = parts.wrap(ScriptedProvider([]))
    assert isinstance(wrapped, WorkflowGate) and isinstance(wrapped.provider, ShapeRouter)
    parts.close()


def test_what_is_left_out_is_not_built(tmp_path: Path) -> None:
    parts = engine(
        tmp_path / "engine", memory=False, plan_mode=False, mcp_top_k=None, long_cache=False
    )
    assert parts.hooks == [] and parts.tools == []
    model = ScriptedProvider([])
    assert parts.wrap(model) is model
    with pytest.raises(TypeError, match="engine\\(policy"):
        parts.agent(model, hooks=[Veto()])


async def test_a_policy_veto_stops_the_run_before_the_router_draws(tmp_path: Path) -> None:
    parts = engine(tmp_path / "engine", skills=skill_folder(tmp_path), policy=[Veto()], seed=1)
    assert parts.router is not None
    state = parts.router.rng.getstate()
    model = ScriptedProvider(["never"])
    result = await parts.agent(model).run("hello")
    assert result.reason == "vetoed" and model.requests == []
    assert parts.router.pick is None and parts.router.rng.getstate() == state  # no draw
    assert parts.router.arms.all() == {}


async def test_plan_mode_refuses_before_an_approval_hook_is_asked(tmp_path: Path) -> None:
    policy = AskEverything()
    parts = engine(tmp_path / "engine", policy=[policy])
    model = ScriptedProvider([call("enter_plan_mode"), call("write_file", path="a"), "Planned."])
    agent = parts.agent(model, tools=[write_file])
    result = await agent.run("change a")
    refused = [m for m in result.messages if isinstance(m, ToolResultMessage) and m.is_error]
    assert len(refused) == 1 and "Plan mode is on" in refused[0].text
    assert result.reason == "completed" and policy.asked == []  # never asked: refused first
    # plan mode hides enter_plan_mode too once it is on
    assert "enter_plan_mode" not in [t.name for t in model.requests[1].tools]


async def test_the_whole_engine_carries_over_in_its_folder(tmp_path: Path) -> None:
    db, skills = tmp_path / "engine", skill_folder(tmp_path)
    ended: list[str] = []

    def build(answers: list[Any], cheap_answers: list[Any]) -> tuple[Engine, Any, Any]:
        strong = ScriptedProvider(answers, name="big", model="big-1")
        cheap = ScriptedProvider(cheap_answers, name="small", model="small-1")
        parts = engine(
            db,
            skills=skills,
            user_id="ada",
            cheap=cheap,
            gate=lambda text: "All systems go." if text == "/status" else None,
            on_session_end=lambda info: ended.append(info.reason),
            seed=3,
        )
        return parts, strong, cheap

    summary = "Ada told the assistant her name."
    first, strong, cheap = build(
        [call("remember", fact="The user's name is Ada."), "Noted, Ada."], [summary]
    )
    async with first.agent(strong).stream("Hi, I am Ada. Remember my name.") as events:
        seen = [e async for e in events]
    result = events.result
    assert result is not None and result.text == "Noted, Ada."
    custom = [e for e in seen if isinstance(e, CustomEvent)]
    routes = [e.value for e in custom if e.name == ROUTE_EVENT]
    assert [r["route"] for r in routes] == ["strong", "strong", "cheap"]
    assert routes[0]["tools"] == 4 and routes[0]["model"] == "big-1"  # exit_plan_mode hidden
    assert routes[2]["tools"] == 0  # the post-run summary: short and tool-free
    (done,) = [e.value for e in custom if e.name == SUMMARY_EVENT]
    assert done["summary"] == summary
    assert list(result.usage_by_model) == ["big-1"]
    assert first.router is not None and first.router.pick is not None
    assert first.router.arms.all() == {"greeting": (2.0, 1.0)}  # credited
    assert ended == ["completed"]
    first.close()

    # A new engine on the same file: memory is recalled, the arms and the style carry over.
    second, strong, cheap = build(["Your name is Ada."], ["Summary two.", "Summary three."])
    agent = second.agent(strong)
    assert (await agent.run("What is my name?")).text == "Your name is Ada."
    request = strong.requests[0]
    texts = [getattr(m, "text", "") for m in request.messages]
    assert any(t.startswith(USER_MEMORY_HEADER) and "Ada" in t for t in texts)
    assert any(t.startswith(RECALL_HEADER) and summary in t for t in texts)
    assert "greeting" in (request.system_prompt or "")  # the router's hint line
    assert "User style" in (request.system_prompt or "")  # from the first run's observation
    assert (await agent.run("/status")).text == "All systems go."  # the gate, no model
    assert len(strong.requests) == 1  # the cheap model only wrote the post-run summaries
    assert [(r.system_prompt or "")[:9] for r in cheap.requests] == ["Summarise"] * 2
    second.close()


async def test_the_long_cache_tier_is_decided_on_the_request_as_sent(tmp_path: Path) -> None:
    """The memory block alone takes the request past LongCache's 1,024 tokens: the tier is
    chosen after the request editors ran, so it is the long one."""
    parts = engine(tmp_path / "engine", plan_mode=False, summarise=False)
    assert parts.memory is not None
    for n in range(10):
        parts.memory.remember(f"The user note {n}: " + "likes long detailed answers " * 20)
    model = ScriptedProvider(["Hi."])
    await parts.agent(model, system_prompt="Be brief.").run("hello")
    (request,) = model.requests
    assert any(getattr(m, "text", "").startswith(USER_MEMORY_HEADER) for m in request.messages)
    assert request.prompt_cache == "long"

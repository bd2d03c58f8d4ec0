"""treadle.ext.skills and treadle.ext.auto_skills: the catalog, Thompson picks, learning from
how runs end, and drafting a skill after three successes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from treadle import Agent, ProviderError
from treadle.ext.auto_skills import AutoSkills, task_signature
from treadle.ext.skills import (
    Skill,
    SkillArms,
    SkillRouter,
    load_skills,
    outcome_of,
    parse_front_matter,
)
from treadle.loop import InputFilter, Reject
from treadle.testing import ScriptedProvider


def write_skill(root: Path, folder: str, text: str) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_front_matter() -> None:
    meta, body = parse_front_matter(
        "---\n"
        "name: pdf-forms\n"
        "# a comment\n"
        'description: "Fill PDF forms: text fields,"\n'
        "  checkboxes and signatures\n"
        "notes: |\n"
        "  line one\n"
        "  line two\n"
        "---\n"
        "# Steps\n1. open it\n"
    )
    assert meta == {
        "name": "pdf-forms",
        "description": "Fill PDF forms: text fields, checkboxes and signatures",
        "notes": "line one\nline two",
    }
    assert body == "# Steps\n1. open it"
    assert parse_front_matter("no front matter") == ({}, "no front matter")
    assert parse_front_matter("---\nname: x\n") == ({}, "---\nname: x\n")  # never closed


def test_catalog_from_folders(tmp_path: Path) -> None:
    write_skill(tmp_path, "a", "---\nname: alpha\ndescription: First.\n---\nDo A.")
    write_skill(tmp_path, "nested/b", "---\ndescription: Second.\n---\nDo B.")
    write_skill(tmp_path, "c", "---\nname: alpha\ndescription: again\n---\n")
    (tmp_path / "README.md").write_text("not a skill")
    with pytest.warns(UserWarning, match="repeats a name"):
        skills = load_skills(tmp_path)
    assert [(s.name, s.description, s.body) for s in skills] == [
        ("alpha", "First.", "Do A."),
        ("b", "Second.", "Do B."),  # the folder's name when there is none
    ]
    assert load_skills(tmp_path / "missing") == []


def test_outcomes() -> None:
    assert outcome_of("completed") == "success"
    assert {outcome_of(r) for r in ("limit", "error", "cancelled")} == {"failure"}
    assert {outcome_of(r) for r in ("rejected", "vetoed", "suspended")} == {"neutral"}


def test_thompson_prefers_the_arm_that_wins() -> None:
    skills = [Skill("good", "wins"), Skill("bad", "loses")]
    arms = SkillArms()
    arms.set("good", 20, 1)
    arms.set("bad", 1, 20)
    router = SkillRouter(skills, arms, seed=1)
    picks = [router.choose() for _ in range(500)]
    good = sum(1 for p in picks if p is not None and p.name == "good")
    assert good > 480
    # the same seed gives the same picks
    again = SkillRouter(skills, arms, seed=1)
    assert [again.choose() for _ in range(500)] == picks
    # even arms split about evenly
    even = SkillRouter(skills, SkillArms(), seed=2)
    share = sum(1 for _ in range(1000) if even.choose() == skills[0]) / 1000
    assert 0.4 < share < 0.6
    assert SkillRouter([], seed=1).choose() is None


class No(InputFilter):
    def filter(self, text: str) -> Reject:
        return Reject("no")


@pytest.mark.anyio
async def test_the_pick_is_hinted_and_credited(tmp_path: Path) -> None:
    write_skill(tmp_path, "pdf", "---\nname: pdf\ndescription: Fill PDF forms.\n---\nSteps")
    arms = SkillArms(tmp_path / "arms.db")
    router = SkillRouter(tmp_path, arms, seed=3)
    provider = ScriptedProvider(["ok", ProviderError("bad_request", "nope")])
    agent = Agent(provider, hooks=[router], system_prompt="Be brief.")
    result = await agent.run("fill this form")
    assert result.reason == "completed"
    system = provider.requests[0].system_prompt or ""
    assert system.startswith("Be brief.\n\n")
    hint = system.split("\n\n", 1)[1]
    assert "pdf" in hint and "Fill PDF forms." in hint and "\n" not in hint
    assert arms.get("pdf") == (2.0, 1.0)  # credited
    assert (await agent.run("again")).reason == "error"
    assert arms.get("pdf") == (2.0, 2.0)  # debited
    rejected = Agent(provider, hooks=[router], input_filters=[No()])
    assert (await rejected.run("x")).reason == "rejected"
    assert arms.get("pdf") == (2.0, 2.0)  # neutral: unchanged
    # another router on the same file (another process) sees the arms
    assert SkillArms(tmp_path / "arms.db").get("pdf") == (2.0, 2.0)


@pytest.mark.anyio
async def test_no_skills_no_hint() -> None:
    provider = ScriptedProvider(["ok"])
    await Agent(provider, hooks=[SkillRouter([])], system_prompt="S").run("hi")
    assert provider.requests[0].system_prompt == "S"


@pytest.mark.anyio
async def test_a_limit_is_a_failure(tmp_path: Path) -> None:
    from treadle import AssistantMessage, ExecutionLimits, ToolCall, tool

    @tool
    def step() -> str:
        """A step."""
        return "done"

    call = AssistantMessage(content=[ToolCall(id="1", name="step", arguments={})])
    router = SkillRouter([Skill("s", "d")], seed=0)
    agent = Agent(
        ScriptedProvider([call, call]),
        tools=[step],
        hooks=[router],
        limits=ExecutionLimits(max_turns=1),
    )
    assert (await agent.run("go")).reason == "limit"
    assert router.arms.get("s") == (1.0, 2.0)


def test_read_skill_tool() -> None:
    router = SkillRouter([Skill("s", "d", body="the steps")])
    read = router.read_skill_tool()
    assert read.traits.category.value == "info"
    assert read.func("s") == "the steps"
    with pytest.raises(ValueError, match="known: s"):
        read.func("t")


# ---- auto-skills ----


def test_task_signature() -> None:
    assert task_signature("Convert the CSV report to a PDF, please!") == "convert-csv-report"
    assert task_signature("convert a csv REPORT into pdf") == "convert-csv-report"
    assert task_signature("Summarise: quarterly numbers; summarise again") == (
        "numbers-quarterly-summarise"
    )
    assert task_signature("is it ok?") is None
    assert task_signature("deploy app") == "app-deploy"


@pytest.mark.anyio
async def test_three_successes_draft_a_skill(tmp_path: Path) -> None:
    router = SkillRouter(tmp_path, SkillArms(tmp_path / "arms.db"), seed=0)
    auto = AutoSkills(tmp_path, router, db=tmp_path / "arms.db")
    provider = ScriptedProvider(["done"] * 5 + [ProviderError("bad_request", "x")])
    agent = Agent(provider, hooks=[router, auto])
    sig = "convert-csv-report"
    await agent.run("Convert the CSV report to PDF")
    await agent.run("convert this csv report please")
    assert auto.streak(sig) == 2 and auto.drafted == []
    await agent.run("Could you convert the weekly CSV report?")  # ties keep the earlier
    assert task_signature("Could you convert the weekly CSV report?") == "convert-report-weekly"
    assert auto.drafted == []  # another signature: its own streak
    await agent.run("CONVERT csv report")
    folder = tmp_path / "auto" / sig
    assert [s.name for s in auto.drafted] == [f"auto-{sig}"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["auto_drafted"] is True and manifest["needs_review"] is True
    assert manifest["score"] == 0.7 and manifest["signature"] == sig
    assert len(manifest["examples"]) == 3
    skill = load_skills(tmp_path)[0]
    assert skill.name == f"auto-{sig}" and "Convert the CSV report to PDF" in skill.body
    assert f"auto-{sig}" in router.skills
    assert router.arms.get(f"auto-{sig}") == pytest.approx((1.7, 1.3))
    # a new router on the folder finds the draft
    assert f"auto-{sig}" in SkillRouter(tmp_path).skills
    # more successes do not draft again
    await agent.run("convert csv report")
    assert len(auto.drafted) == 1


def test_a_failure_resets_the_streak(tmp_path: Path) -> None:
    auto = AutoSkills(tmp_path, db=tmp_path / "s.db")
    for _ in range(2):
        auto.observe("convert csv report", "completed")
    assert auto.streak("convert-csv-report") == 2
    auto.observe("convert csv report", "rejected")  # neutral
    assert auto.streak("convert-csv-report") == 2
    auto.observe("convert csv report", "error")
    assert auto.streak("convert-csv-report") == 0
    for _ in range(2):
        assert auto.observe("convert csv report", "completed") is None
    assert not (tmp_path / "auto").exists()
    # streaks are kept in the database
    assert AutoSkills(tmp_path, db=tmp_path / "s.db").streak("convert-csv-report") == 2
    assert auto.observe("convert csv report", "completed") is not None

"""What keeps idle extensions cheap: deferred writes (one transaction at the run's end, seen
by any read before), caches checked against a stamp, no waiting on the event loop for a
busy database, and checkpoints off the event loop."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import ModuleType

import pytest

from treadle import Agent
from treadle.ext import _db
from treadle.ext._db import Database
from treadle.ext.mcp_curation import McpCuration
from treadle.ext.skills import Skill, SkillArms, SkillRouter
from treadle.ext.style import SqliteUserModel, StyleDetector, StyleHints
from treadle.testing import ScriptedProvider

SCHEMA = "CREATE TABLE IF NOT EXISTS t (v INTEGER);"


def count_thread_trips(monkeypatch: pytest.MonkeyPatch, *modules: ModuleType) -> list[str]:
    """Replace ``in_thread`` in ``modules`` with an inline call that records each trip."""
    trips: list[str] = []

    async def counted(fn):  # type: ignore[no-untyped-def]
        trips.append(getattr(fn, "__qualname__", "?"))
        return fn()

    for module in modules:
        monkeypatch.setattr(module, "in_thread", counted)
    return trips


def test_deferred_writes_are_seen_by_every_read(tmp_path: Path) -> None:
    db = Database(tmp_path / "t.db", SCHEMA)
    db.defer("INSERT INTO t VALUES (?)", (1,))
    db.defer("INSERT INTO t VALUES (?)", (2,))
    other = Database(tmp_path / "t.db", SCHEMA)  # another process, say
    assert other.query("SELECT count(*) FROM t") == [(0,)]  # not written yet
    assert db.query("SELECT v FROM t ORDER BY v") == [(1,), (2,)]  # the read flushed them
    assert other.query("SELECT count(*) FROM t") == [(2,)] and not db.pending


def test_a_busy_database_is_not_waited_for_inline(tmp_path: Path) -> None:
    db = Database(tmp_path / "t.db", SCHEMA)
    writer = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    db.defer("INSERT INTO t VALUES (1)")
    assert db.try_flush() is False and len(db.pending) == 1  # kept, nothing waited for
    writer.execute("COMMIT")
    assert db.try_flush() is True and not db.pending
    assert db.query("SELECT count(*) FROM t") == [(1,)]


@pytest.mark.anyio
async def test_flush_soon_goes_to_a_thread_when_busy(tmp_path: Path) -> None:
    import anyio

    db = Database(tmp_path / "t.db", SCHEMA)
    writer = sqlite3.connect(tmp_path / "t.db", isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")
    db.defer("INSERT INTO t VALUES (1)")

    async def release() -> None:
        await anyio.sleep(0.05)
        writer.execute("COMMIT")

    async with anyio.create_task_group() as tg:
        tg.start_soon(release)
        await db.flush_soon()  # waits in a worker thread, not on the event loop
    assert not db.pending and db.query("SELECT count(*) FROM t") == [(1,)]


def test_checkpoints_come_every_so_many_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_db, "CHECKPOINT_EVERY", 3)
    db = Database(tmp_path / "t.db", SCHEMA)
    assert db.wal and db.query("PRAGMA wal_autocheckpoint") == [(0,)]
    for i in range(2):
        db.execute("INSERT INTO t VALUES (?)", (i,))
    assert db.commits == 2
    db.execute("INSERT INTO t VALUES (3)")
    assert db.commits == 0  # checkpointed


def test_a_batch_that_cannot_be_written_is_dropped(tmp_path: Path) -> None:
    db = Database(tmp_path / "t.db", SCHEMA)
    db.defer("INSERT INTO nowhere VALUES (1)")
    assert db.query("SELECT count(*) FROM t") == [(0,)] and not db.pending


def test_cached_arms_follow_other_writers(tmp_path: Path) -> None:
    path = tmp_path / "arms.db"
    arms = SkillArms(path)
    router = SkillRouter([Skill("a", "A")], arms, seed=1)
    router._reload()
    arms.record_later("a", "success")
    assert arms.get("a") == (2.0, 1.0)  # a read flushes first
    SkillArms(path).record("a", "failure")  # another process
    assert router.arms.stamp() != router._arms_at
    router._reload()
    assert router._arms == {"a": (2.0, 2.0)}


@pytest.mark.anyio
async def test_idle_runs_make_no_thread_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from treadle.ext import skills, style

    trips = count_thread_trips(monkeypatch, skills, style)
    arms = SkillArms(tmp_path / "arms.db")
    users = SqliteUserModel(tmp_path / "users.db")
    router = SkillRouter([Skill("a", "A"), Skill("b", "B")], arms, seed=2)
    hooks = [router, StyleHints(users, user_id="ada"), McpCuration(tmp_path / "audit.db")]
    agent = Agent(ScriptedProvider(["ok"] * 4), hooks=hooks, system_prompt="S")
    for _ in range(4):
        await agent.run("hey, kannst du mir das bitte kurz erklären?")
        agent.reset()
    assert len(trips) == 2  # the first run reads the arms and the profile; then none
    assert sum(a + b - 2 for a, b in (arms.get("a"), arms.get("b"))) == 4  # 4 credits
    profile = SqliteUserModel(tmp_path / "users.db").profile("ada")  # written: durable
    assert profile is not None and profile.observations == 4 and profile.language == "de"


def test_cached_profile_matches_a_fresh_read(tmp_path: Path) -> None:
    detect = StyleDetector().observe
    model = SqliteUserModel(tmp_path / "users.db", window=3)
    assert model.profile("ada") is None
    for text in ("hey du", "Dear team, kindly review.", "ich weiß nicht, wie das geht", "ok"):
        model.observe_later("ada", detect(text))
        known, cached = model.cached_profile("ada")
        assert known
        model.flush()
        assert cached == SqliteUserModel(tmp_path / "users.db", window=3).profile("ada")


@pytest.mark.anyio
async def test_auto_skills_counts_in_a_thread_only_runs_that_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from treadle.ext import auto_skills
    from treadle.ext.auto_skills import AutoSkills

    trips = count_thread_trips(monkeypatch, auto_skills)
    auto = AutoSkills(tmp_path / "skills", db=tmp_path / "skills.db")
    agent = Agent(ScriptedProvider(["ok"] * 2), hooks=[auto])
    await agent.run("is it on?")  # no task signature: nothing to count
    agent.reset()
    await agent.run("convert the csv report")
    assert len(trips) == 1 and auto.streak("convert-csv-report") == 1

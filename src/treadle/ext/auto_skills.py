"""Auto-skills: runs are grouped by a task signature; three successes in a row on one
signature draft a skill for review (``<root>/auto/<signature>/SKILL.md`` and
``manifest.json``) and hand it to a :class:`~treadle.ext.skills.SkillRouter`.

::

    router = SkillRouter("skills/", arms="skills.db")
    agent = Agent(model, hooks=[router, AutoSkills("skills/", router, db="skills.db")])
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from ..loop import RunEnding, RunHandle
from ..types import AgentMessage, AssistantMessage
from ._db import Database
from ._run import RunTracker, in_thread
from ._text import keywords
from .skills import Skill, SkillRouter, load_skill, outcome_of

__all__ = ["AutoSkills", "task_signature"]

_STREAKS = """
CREATE TABLE IF NOT EXISTS auto_skill_streaks (
    signature TEXT PRIMARY KEY,
    streak INTEGER NOT NULL,
    examples TEXT NOT NULL,
    updated REAL NOT NULL
);
"""


def task_signature(text: str) -> str | None:
    """A task's signature: the text lowercased and split on whitespace and ASCII
    punctuation; stopwords, repeats and tokens shorter than 3 dropped; the three longest
    tokens (the earlier one on a tie) sorted and joined with ``-``. None when no token is
    left."""
    tokens = keywords(text, min_len=3)
    if not tokens:
        return None
    longest = sorted(range(len(tokens)), key=lambda i: (-len(tokens[i]), i))[:3]
    return "-".join(sorted(tokens[i] for i in longest))


class AutoSkills(RunTracker):
    """A hook that watches how runs end, per task signature of their first user message.

    A success (``completed``) extends the signature's streak, a failure (``limit``,
    ``error``, ``cancelled``) resets it, a neutral end leaves it. When the streak reaches
    ``streak`` (3) and no draft exists yet, a skill is drafted under ``<root>/auto/<sig>/``:
    ``SKILL.md`` (the example tasks, the tools they used, the last answer) and
    ``manifest.json`` (``auto_drafted: true``, ``needs_review: true``, ``score``), then
    added to ``router`` with the arm prior Beta(1 + score, 2 - score). Streaks live in
    SQLite (``db``). ``drafted`` lists the skills drafted by this hook.
    """

    def __init__(
        self,
        root: str | Path,
        router: SkillRouter | None = None,
        *,
        db: str | Path = ":memory:",
        streak: int = 3,
        score: float = 0.7,
    ) -> None:
        self.root = Path(root)
        self.router = router
        self.threshold = streak
        self.score = score
        self._db = Database(db, _STREAKS)
        self.drafted: list[Skill] = []

    def streak(self, signature: str) -> int:
        rows = self._db.query(
            "SELECT streak FROM auto_skill_streaks WHERE signature = ?", (signature,)
        )
        return int(rows[0][0]) if rows else 0

    def observe(
        self, text: str, reason: str, new_messages: Sequence[AgentMessage] = ()
    ) -> Skill | None:
        """Count one run (blocking); returns the skill it drafted, if any."""
        signature = task_signature(text)
        outcome = outcome_of(reason)
        if signature is None or outcome == "neutral":
            return None
        if outcome == "failure":
            self._db.execute("DELETE FROM auto_skill_streaks WHERE signature = ?", (signature,))
            return None
        rows = self._db.query(
            "SELECT streak, examples FROM auto_skill_streaks WHERE signature = ?", (signature,)
        )
        count, examples = (int(rows[0][0]), json.loads(rows[0][1])) if rows else (0, [])
        count += 1
        examples = [*examples, text][-self.threshold :]
        self._db.execute(
            "INSERT OR REPLACE INTO auto_skill_streaks VALUES (?, ?, ?, ?)",
            (signature, count, json.dumps(examples), time.time()),
        )
        folder = self.root / "auto" / signature
        if count < self.threshold or (folder / "SKILL.md").exists():
            return None
        skill = self._draft(folder, signature, examples, new_messages)
        self.drafted.append(skill)
        if self.router is not None:
            self.router.add(skill, prior=(1 + self.score, 2 - self.score))
        return skill

    def _draft(
        self, folder: Path, signature: str, examples: list[str], messages: Sequence[AgentMessage]
    ) -> Skill:
        tools = sorted(
            {c.name for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
        )
        answer = next(
            (m.text for m in reversed(messages) if isinstance(m, AssistantMessage) and m.text),
            "",
        )
        first = " ".join(examples[0].split())[:100]
        name = f"auto-{signature}"
        description = f"Drafted from {len(examples)} successful runs on tasks like: {first}"
        lines = [
            "---",
            f"name: {name}",
            f"description: {description}",
            "---",
            f"# {signature} (auto-drafted, needs review)",
            "",
            "Tasks this skill was drafted from:",
            *(f"- {' '.join(e.split())}" for e in examples),
            "",
            f"Tools those runs used: {', '.join(tools) or 'none'}.",
        ]
        if answer:
            lines += ["", "The last answer, for reference:", "", answer.strip()[:2000]]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
        manifest = {
            "name": name,
            "signature": signature,
            "auto_drafted": True,
            "needs_review": True,
            "score": self.score,
            "created": datetime.now(timezone.utc).isoformat(),
            "examples": examples,
            "tools": tools,
        }
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", "utf-8")
        return load_skill(folder / "SKILL.md")

    async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
        text, reason = self.input(run), ending.reason
        if text is None or outcome_of(reason) == "neutral" or task_signature(text) is None:
            return  # nothing to count (what observe would find): no thread trip
        await in_thread(lambda: self.observe(text, reason, ending.new_messages))

    def close(self) -> None:
        """Close the streaks database."""
        self._db.close()

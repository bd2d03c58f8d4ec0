"""Skills: folders holding a ``SKILL.md`` (front matter with ``name`` and ``description``,
then instructions), and a router that picks one per run by Thompson sampling and learns
from how runs end.

::

    router = SkillRouter("skills/", arms="skills.db", seed=7)
    agent = Agent(model, hooks=[router], tools=[router.read_skill_tool()])
"""

from __future__ import annotations

import random
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..errors import ConfigurationError
from ..loop import Hooks, RunEnding, RunHandle
from ..providers import ModelRequest
from ..tools import FunctionTool
from ._db import Database
from ._run import add_to_system, in_thread

__all__ = [
    "Outcome",
    "Skill",
    "SkillArms",
    "SkillRouter",
    "load_skills",
    "outcome_of",
    "parse_front_matter",
]

Outcome = Literal["success", "failure", "neutral"]
_SUCCESS = {"completed"}
_FAILURE = {"limit", "error", "cancelled"}


def outcome_of(reason: str) -> Outcome:
    """How a run's ``agent_end.reason`` counts: ``completed`` is a success; ``limit``,
    ``error`` and ``cancelled`` are failures; anything else (``rejected``, ``vetoed``,
    ``suspended``) is neutral."""
    if reason in _SUCCESS:
        return "success"
    if reason in _FAILURE:
        return "failure"
    return "neutral"


@dataclass(frozen=True)
class Skill:
    """One skill: its ``name``, a one-line ``description``, the instructions (``body``), the
    ``SKILL.md`` it came from (if any) and every front-matter field (``meta``)."""

    name: str
    description: str
    body: str = ""
    path: Path | None = None
    meta: dict[str, str] = field(default_factory=dict)


def parse_front_matter(text: str) -> tuple[dict[str, str], str]:
    """``(fields, body)`` of a Markdown file with a ``---`` front-matter block.

    A YAML subset: ``key: value`` lines (quotes around the value are removed), indented
    lines continue the previous value, ``key: >`` or ``key: |`` start a block, ``#`` lines
    are comments. Without front matter the fields are empty and the body is the text.
    """
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    try:
        end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() == "---")
    except StopIteration:
        return {}, text
    fields: dict[str, str] = {}
    blocks: dict[str, str] = {}
    key: str | None = None
    for raw in lines[1:end]:
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            if key in blocks and blocks[key] == "|":
                fields[key] += "\n"
            continue
        if raw[:1] in (" ", "\t") and key is not None:
            joiner = "\n" if blocks.get(key) == "|" else " "
            fields[key] = f"{fields[key]}{joiner}{stripped}" if fields[key] else stripped
            continue
        name, sep, value = stripped.partition(":")
        if not sep:
            continue
        key, value = name.strip(), value.strip()
        if value in (">", "|", ">-", "|-"):
            blocks[key] = value[0]
            value = ""
        elif len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        fields[key] = value
    fields = {k: v.strip() for k, v in fields.items()}
    return fields, "\n".join(lines[end + 1 :]).strip("\n")


def load_skill(path: str | Path) -> Skill:
    """The skill in a ``SKILL.md`` file (its folder name when it has no ``name``)."""
    path = Path(path)
    meta, body = parse_front_matter(path.read_text(encoding="utf-8"))
    name = meta.get("name") or path.parent.name
    description = " ".join(meta.get("description", "").split())
    return Skill(name=name, description=description, body=body, path=path, meta=meta)


def load_skills(root: str | Path) -> list[Skill]:
    """Every skill under ``root`` (any ``SKILL.md`` in its folders, at any depth), by name.
    A missing root is an empty catalog; a second skill with a taken name is skipped with a
    warning."""
    root = Path(root)
    found: dict[str, Skill] = {}
    for path in sorted(root.rglob("SKILL.md")) if root.is_dir() else []:
        skill = load_skill(path)
        if skill.name in found:
            warnings.warn(f"skill {skill.name!r} in {path} repeats a name; skipped", stacklevel=2)
            continue
        found[skill.name] = skill
    return sorted(found.values(), key=lambda s: s.name)


_ARMS = """
CREATE TABLE IF NOT EXISTS arms (
    skill TEXT PRIMARY KEY,
    alpha REAL NOT NULL,
    beta REAL NOT NULL,
    updated REAL NOT NULL
);
"""


_STEP = (
    "INSERT INTO arms(skill, alpha, beta, updated) VALUES (?, {a}, {b}, ?) ON CONFLICT(skill) "
    "DO UPDATE SET {column} = {column} + 1, updated = excluded.updated"
)
_CREDIT = _STEP.format(a=2, b=1, column="alpha")
_DEBIT = _STEP.format(a=1, b=2, column="beta")


class SkillArms:
    """Beta(alpha, beta) arms, one per skill, in SQLite (shared by processes using the same file).
    A skill never seen has the prior Beta(1, 1)."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        self._db = Database(path, _ARMS)

    def get(self, skill: str) -> tuple[float, float]:
        rows = self._db.query("SELECT alpha, beta FROM arms WHERE skill = ?", (skill,))
        return (float(rows[0][0]), float(rows[0][1])) if rows else (1.0, 1.0)

    def all(self) -> dict[str, tuple[float, float]]:
        rows = self._db.query("SELECT skill, alpha, beta FROM arms")
        return {name: (float(a), float(b)) for name, a, b in rows}

    def set(self, skill: str, alpha: float, beta: float) -> None:
        if alpha <= 0 or beta <= 0:
            raise ConfigurationError("alpha and beta must be positive")
        self._db.execute(
            "INSERT INTO arms(skill, alpha, beta, updated) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(skill) DO UPDATE SET alpha = excluded.alpha, beta = excluded.beta, "
            "updated = excluded.updated",
            (skill, alpha, beta, time.time()),
        )

    def seed(self, skill: str, alpha: float, beta: float) -> None:
        """Set the arm unless it already has one."""
        self._db.execute(
            "INSERT OR IGNORE INTO arms(skill, alpha, beta, updated) VALUES (?, ?, ?, ?)",
            (skill, alpha, beta, time.time()),
        )

    def record(self, skill: str, outcome: Outcome) -> None:
        """A success adds 1 to alpha, a failure 1 to beta; neutral changes nothing."""
        self.record_later(skill, outcome)
        self._db.flush()

    def record_later(self, skill: str, outcome: Outcome) -> None:
        """Like :meth:`record`, written by the next :meth:`flush` (no I/O now) — or before
        anything reads the arms. An increment, so processes sharing the file add up."""
        if outcome != "neutral":  # one statement: the prior Beta(1, 1) plus this step
            self._db.defer(_CREDIT if outcome == "success" else _DEBIT, (skill, time.time()))

    def flush(self) -> None:
        """Write what :meth:`record_later` queued (blocking)."""
        self._db.flush()

    async def flush_soon(self) -> None:
        """Write what :meth:`record_later` queued: inline when that cannot block, else in a
        worker thread."""
        await self._db.flush_soon()

    def stamp(self) -> tuple[int, int] | None:
        """Changes whenever an arm may have changed (here or in another process)."""
        return self._db.stamp()

    def advance(self, stamp: tuple[int, int] | None) -> tuple[int, int] | None:
        """The stamp now if only this instance wrote since ``stamp``, else None."""
        return self._db.advance(stamp)

    def close(self) -> None:
        self._db.close()


DEFAULT_HINT = "Skill hint (optional, not binding): {name} may fit this task: {description}"


class SkillRouter(Hooks):
    """A hook that picks one skill per run and learns which ones work.

    Before the run, each skill's arm is sampled from its Beta(alpha, beta) and the highest draw
    wins (Thompson sampling; ``seed`` or ``rng`` make it repeatable). The pick adds one hint
    line (``hint``, with ``{name}``, ``{description}``, ``{path}``) to the system prompt of
    every model call of the run. When the run ends, :func:`outcome_of` its reason credits
    or debits the arm. ``skills`` is a folder (see :func:`load_skills`) or skills;
    ``arms`` a :class:`SkillArms` or the path of its SQLite file. Each run's pick is kept
    in ``run.state_for(self)`` (:meth:`pick_of`), so one router serves any number of runs
    at once; ``pick`` is the skill of the run that started last, to look at.
    """

    def __init__(
        self,
        skills: str | Path | Iterable[Skill],
        arms: SkillArms | str | Path = ":memory:",
        *,
        seed: int | None = None,
        rng: random.Random | None = None,
        hint: str = DEFAULT_HINT,
    ) -> None:
        found = load_skills(skills) if isinstance(skills, (str, Path)) else list(skills)
        self.skills: dict[str, Skill] = {s.name: s for s in found}
        self.arms = arms if isinstance(arms, SkillArms) else SkillArms(arms)
        self.rng = rng or random.Random(seed)
        self.hint = hint
        self.pick: Skill | None = None
        self._hint: str | None = None  # the hint line of _hint_of's pick
        self._hint_of: tuple[Skill | None, str] = (None, hint)  # what _hint was made from
        self._arms: dict[str, tuple[float, float]] = {}
        self._arms_at: tuple[int, int] | None = None  # the stamp the cached arms were read at

    def add(self, skill: Skill, prior: tuple[float, float] | None = None) -> None:
        """Add (or replace) a skill; ``prior`` seeds its arm if it has none yet."""
        self.skills[skill.name] = skill
        if prior is not None:
            self.arms.seed(skill.name, *prior)

    def choose(self) -> Skill | None:
        """One Thompson draw over the catalog (None when it is empty)."""
        return self._draw(self.arms.all())

    def _draw(self, arms: dict[str, tuple[float, float]]) -> Skill | None:
        if not self.skills:
            return None
        best, best_draw = None, -1.0
        for name in sorted(self.skills):
            alpha, beta = arms.get(name, (1.0, 1.0))
            draw = self.rng.betavariate(alpha, beta)
            if draw > best_draw:
                best, best_draw = self.skills[name], draw
        return best

    def hint_line(self, skill: Skill) -> str:
        text = self.hint.format(
            name=skill.name, description=skill.description or "(no description)", path=skill.path
        )
        return " ".join(text.split())

    def _reload(self) -> None:
        self.arms.flush()
        self._arms_at = self.arms.stamp()  # first: a change after it shows next time
        self._arms = self.arms.all()

    async def before_loop(self, run: RunHandle) -> bool:
        chosen = run.state_for(self)
        if not self.skills:
            chosen["pick"] = chosen["hint"] = self.pick = None
            return True
        stamp = self.arms.stamp()
        if stamp is None or stamp != self._arms_at:
            await in_thread(self._reload)  # the arms changed since they were cached
        pick = self.pick = chosen["pick"] = self._draw(self._arms)
        if self._hint_of != (pick, self.hint) or self._hint is None:  # once per pick
            self._hint = self.hint_line(pick) if pick is not None else None
            self._hint_of = (pick, self.hint)
        chosen["hint"] = self._hint
        return True

    def pick_of(self, run: RunHandle) -> Skill | None:
        """The skill picked for ``run`` (None: none, or the catalog is empty)."""
        pick: Skill | None = run.state_for(self).get("pick")
        return pick

    async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
        hint = run.state_for(self).get("hint")
        if hint is None:
            return request
        system = add_to_system(request.system_prompt, hint)
        return request.model_copy(update={"system_prompt": system})

    async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
        pick, outcome = self.pick_of(run), outcome_of(ending.reason)
        if pick is None or outcome == "neutral":
            return
        # The write waits for the run's end and costs no thread trip when the file is
        # free; the cached arms take the same step, so the next draw needs no read.
        at = self._arms_at
        self.arms.record_later(pick.name, outcome)
        await self.arms.flush_soon()
        alpha, beta = self._arms.get(pick.name, (1.0, 1.0))
        step = (alpha + 1, beta) if outcome == "success" else (alpha, beta + 1)
        self._arms = {**self._arms, pick.name: step}
        self._arms_at = self.arms.advance(at)  # None (read next time) if others wrote

    def read_skill_tool(self, name: str = "read_skill") -> FunctionTool:
        """A read-only tool returning a skill's full instructions."""
        router = self

        def read_skill(skill: str) -> str:
            """Read the instructions of a skill named in a skill hint.

            Args:
                skill: the skill's name
            """
            found = router.skills.get(skill)
            if found is None:
                raise ValueError(f"no skill {skill!r}; known: {', '.join(sorted(router.skills))}")
            return found.body or found.description

        return FunctionTool(read_skill, name=name, category="info", idempotent=True)

"""The whole engine in one call: every extension of ``treadle.ext`` with its SQLite files in
one folder, its hooks in the order they must run, its tools, and the provider wrappers.

::

    from treadle.ext import engine

    parts = engine(db="engine-data", skills="skills", user_id="ada")
    agent = parts.agent("openai:gpt-4o-mini", system_prompt="Be brief.")

See docs/ext.md ("The engine in one call") for the order and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agent import Agent
from ..errors import UsageError
from ..loop import Hooks
from ..providers import Provider, get_provider
from ..tools import Tool
from .auto_skills import AutoSkills
from .mcp_curation import McpCuration
from .memory import MemoryRecall, MemoryStore, UserMemory
from .plan_mode import PlanMode
from .routing import LongCache, ShapeRouter
from .skills import SkillArms, SkillRouter
from .style import SqliteUserModel, StyleHints
from .workers import CompressionWorker, PostRunWorkers, SessionCallback, SessionEnd, Worker
from .workflow import Interceptor, WorkflowGate

__all__ = ["Engine", "engine"]


@dataclass
class Engine:
    """What :func:`engine` built. ``hooks`` (in the order they must run), ``tools`` (the
    ones the extensions give the model) and :meth:`wrap` (the provider wrappers: the
    workflow gate around the request-shape router) go into an Agent —
    :meth:`agent` does that. The parts are here to read and call: ``memory``, ``router``,
    ``auto_skills``, ``plan``, ``curation``, ``users``, ``workers``; ``None`` when left out.
    """

    hooks: list[Hooks]
    tools: list[Tool]
    memory: MemoryStore | None = None
    router: SkillRouter | None = None
    auto_skills: AutoSkills | None = None
    plan: PlanMode | None = None
    curation: McpCuration | None = None
    users: SqliteUserModel | None = None
    workers: PostRunWorkers | None = None
    cheap: Provider | None = None
    max_cheap_tokens: int = 2000
    gate: Interceptor | None = None
    stores: list[Any] = field(default_factory=list, repr=False)

    def wrap(self, provider: Provider | str) -> Provider:
        """``provider`` behind the engine's wrappers: the request-shape router (when a
        ``cheap`` model was given), inside the workflow gate (when a ``gate`` was given) —
        the gate sees each new input first, so an input it answers reaches no model at all.
        A ``"provider:model"`` string is resolved with :func:`treadle.providers.get_provider`
        when there is something to wrap."""
        if self.cheap is None and self.gate is None:
            return provider  # type: ignore[return-value]  # Agent resolves a spec itself
        model = get_provider(provider) if isinstance(provider, str) else provider
        if self.cheap is not None:
            model = ShapeRouter(model, cheap=self.cheap, max_tokens=self.max_cheap_tokens)
        if self.gate is not None:
            model = WorkflowGate(model, self.gate)
        return model

    def agent(self, model: Provider | str, *, tools: Sequence[Any] = (), **options: Any) -> Agent:
        """An :class:`~treadle.Agent` on ``wrap(model)`` with the engine's hooks and tools
        (``tools`` adds yours after them); ``options`` go to ``Agent``. Your own hooks go
        to :func:`engine` (``policy=`` or ``observers=``), where they take their place in
        the order."""
        if "hooks" in options:
            raise UsageError(
                "Engine.agent() takes no hooks: pass them to engine(policy=[...]) (vetoes, "
                "approvals) or engine(observers=[...]) (tracing, logging) so they run in "
                "their place among the engine's hooks"
            )
        return Agent(
            self.wrap(model), tools=[*self.tools, *tools], hooks=list(self.hooks), **options
        )

    def close(self) -> None:
        """Close the SQLite connections (pending writes are flushed first)."""
        for store in self.stores:
            store.close()


def engine(
    db: str | Path,
    *,
    skills: str | Path | None = None,
    user_id: str | None = None,
    memory: bool = True,
    summarise: bool = True,
    plan_mode: bool = True,
    mcp_top_k: int | None = 10,
    long_cache: bool = True,
    cheap: Provider | None = None,
    max_cheap_tokens: int = 2000,
    gate: Interceptor | None = None,
    workers: Sequence[Worker] = (),
    on_session_end: SessionCallback | Sequence[SessionCallback] = (),
    policy: Sequence[Hooks] = (),
    observers: Sequence[Hooks] = (),
    seed: int | None = None,
) -> Engine:
    """Build every engine extension with its SQLite files in the folder ``db`` (created if
    missing; ``":memory:"`` keeps everything in memory) and return them as an
    :class:`Engine`. The files — ``memory.db``, ``skills.db`` (the router's arms),
    ``streaks.db`` (auto-skills), ``users.db``, ``audit.db`` — carry everything over to the next
    process that opens the folder; one file per store, so one store's writes do not
    invalidate another's caches (each store notices other connections' commits).

    - ``memory``: a :class:`~treadle.ext.memory.MemoryStore` with :class:`MemoryRecall`,
      :class:`UserMemory` and the ``remember`` / ``search_memory`` tools; ``summarise``
      adds a post-run :class:`~treadle.ext.workers.CompressionWorker` into it.
    - ``skills``: a folder of ``SKILL.md`` skills (created if missing) for a
      :class:`~treadle.ext.skills.SkillRouter` (``seed`` makes its draws repeatable), its
      ``read_skill`` tool, and :class:`~treadle.ext.auto_skills.AutoSkills` drafting into it.
    - ``user_id``: :class:`~treadle.ext.style.StyleHints` for that user.
    - ``plan_mode``: :class:`~treadle.ext.plan_mode.PlanMode` and its two tools;
      ``mcp_top_k``: :class:`~treadle.ext.mcp_curation.McpCuration` (None: off);
      ``long_cache``: :class:`~treadle.ext.routing.LongCache`.
    - ``cheap``: a cheaper provider for short tool-free requests
      (:class:`~treadle.ext.routing.ShapeRouter`, ``max_cheap_tokens``); ``gate``: an
      interceptor answering some inputs without the model
      (:class:`~treadle.ext.workflow.WorkflowGate`). Both wrap the provider (:meth:`Engine.wrap`).
    - ``workers``: more post-run workers; ``on_session_end``: callbacks for
      :class:`~treadle.ext.workers.SessionEnd`.
    - ``policy``: your hooks that may stop a run or a call (a ``before_loop`` veto, an
      approval ``Ask``); ``observers``: your hooks that watch (tracing).

    The order of ``Engine.hooks`` (docs/ext.md says why): plan mode, your ``policy``,
    MCP curation, memory recall, user memory, the skill router, auto-skills, style hints,
    the long cache tier, the post-run workers, your ``observers``, session end.
    """

    def file(name: str) -> str | Path:
        return db if str(db) == ":memory:" else Path(db) / name

    if str(db) != ":memory:":
        Path(db).mkdir(parents=True, exist_ok=True)
    stores: list[Any] = []
    tools: list[Tool] = []
    hooks: list[Hooks] = []
    parts = Engine(hooks=hooks, tools=tools, cheap=cheap, max_cheap_tokens=max_cheap_tokens,
                   gate=gate, stores=stores)  # fmt: skip
    if plan_mode:
        parts.plan = PlanMode()
        hooks.append(parts.plan)
    hooks.extend(policy)
    if mcp_top_k is not None:
        parts.curation = McpCuration(file("audit.db"), top_k=mcp_top_k)
        hooks.append(parts.curation)
        stores.append(parts.curation)
    if memory:
        parts.memory = store = MemoryStore(file("memory.db"))
        stores.append(store)
        hooks += [MemoryRecall(store), UserMemory(store)]
        tools += [store.remember_tool(), store.search_tool()]
    if skills is not None:
        Path(skills).mkdir(parents=True, exist_ok=True)
        arms = SkillArms(file("skills.db"))
        stores.append(arms)
        parts.router = SkillRouter(skills, arms, seed=seed)
        parts.auto_skills = AutoSkills(skills, parts.router, db=file("streaks.db"))
        stores.append(parts.auto_skills)
        hooks += [parts.router, parts.auto_skills]
        tools.append(parts.router.read_skill_tool())
    if user_id is not None:
        parts.users = SqliteUserModel(file("users.db"))
        stores.append(parts.users)
        hooks.append(StyleHints(parts.users, user_id=user_id))
    if long_cache:
        hooks.append(LongCache())
    post: list[Worker] = (
        [CompressionWorker(parts.memory)] if parts.memory is not None and summarise else []
    )
    post += workers
    if post:
        parts.workers = PostRunWorkers(post)
        hooks.append(parts.workers)
    hooks.extend(observers)
    callbacks = [on_session_end] if callable(on_session_end) else list(on_session_end)
    if callbacks:
        hooks.append(SessionEnd(*callbacks))
    if parts.plan is not None:
        tools += parts.plan.tools
    return parts

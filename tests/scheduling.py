"""How ``pytest -n N --dist loadgroup`` (``make test``) spreads the suite over its workers.

A *unit* is what one worker runs from start to end. Tests that share an instance of a
module-scoped fixture of this suite (a server, a DBOS launch, the MCP conformance results,
a Node client run) form one unit, so the instance is made once; every other test is a unit
of its own. Session-scoped fixtures (the UI example server, a PostgreSQL cluster) are made
once per worker and bind nothing together: two workers may each start one.

pytest-xdist's own ``loadgroup`` groups by a suffix it writes into each test's node id; since
pytest 9.2 that write is lost (pytest-dev/pytest-xdist#1386) and every test ran alone, each
worker setting up module fixtures of its own. Here the workers instead write the units they
collected to a file the controller's scheduler reads (``pytest_configure_node`` tells them
where); a worker always collects the whole suite before anything runs.

Order: units holding tests marked ``slow`` go first, larger ones before smaller, so the
long ones never start last and leave one worker busy alone at the end; then the rest,
larger units first. A worker takes the next unit when it has at most two tests left.

Collection: each worker imports every test module, and pytest rewrites a module's asserts
the first time it is imported, caching the result in ``__pycache__`` (about 10 s of CPU for
the suite; nothing is cached on a fresh clone, where CI runs). Workers collecting in the
same order would each rewrite every module; here worker k of n starts at k/n of the suite
(by size) and goes round, so each rewrites its own share and finds the others' cached.
The collected tests are then put back in the suite's order, the same on every worker.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

_KEY = "treadle_units"  # the workerinput entry: the folder the workers write their units to
_PER_INSTANCE = {"class": pytest.Class, "module": pytest.Module, "package": pytest.Package}


def _shared_instances(item: pytest.Item) -> list[str]:
    """The instances of the suite's own class/module/package-scoped fixtures the test uses,
    each as ``where::name[param]@scope-node``."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    found = []
    for name, defs in info.name2fixturedefs.items():
        used = defs[-1]  # the closest definition is the one this test gets
        kind = _PER_INSTANCE.get(used.scope)
        if kind is None or not used.baseid:  # session-wide, or a plugin's own
            continue
        holder = item.getparent(kind)
        param = f"[{params[name]!r}]" if name in params else ""
        found.append(f"{used.baseid}::{name}{param}@{holder.nodeid if holder else ''}")
    found.extend(f"xdist_group::{m.args[0]}" for m in item.iter_markers("xdist_group") if m.args)
    return found


def units_of(items: Sequence[pytest.Item]) -> list[dict[str, Any]]:
    """The suite cut into units (tests sharing an instance are one unit), in collection
    order, each ``{"name", "tests", "slow"}`` (how many of its tests are marked ``slow``)."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    keys = {}
    for item in items:
        shared = _shared_instances(item)
        keys[item.nodeid] = root(shared[0]) if shared else None
        for other in shared[1:]:
            parent[root(other)] = root(shared[0])
    units: dict[str, dict[str, Any]] = {}
    for item in items:
        key = keys[item.nodeid]
        name = root(key) if key is not None else item.nodeid
        unit = units.setdefault(name, {"name": name, "tests": [], "slow": 0})
        unit["tests"].append(item.nodeid)
        unit["slow"] += item.get_closest_marker("slow") is not None
    return list(units.values())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker more than the cores this process may use. Much of the suite
    waits (worker processes killed and restarted, paced streams, a browser): with a worker
    per core, a core idles while its worker waits; one more keeps both busy (on two cores,
    3 workers took 3m48s where 2 took 4m38s). ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still wins."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or not hasattr(os, "sched_getaffinity"):
        return None  # xdist's own answer
    return len(os.sched_getaffinity(0)) + 1


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """(controller) Tell each worker where to write the units it collected."""
    config = node.config
    folder = getattr(config, "_treadle_units", None)
    if folder is None:
        folder = config._treadle_units = tempfile.mkdtemp(prefix="treadle-units-")
    node.workerinput[_KEY] = folder


@pytest.hookimpl(tryfirst=True)  # before xdist tells the controller the collection is done
def pytest_collection_finish(session: pytest.Session) -> None:
    """(worker) Write the units of this collection for the controller's scheduler."""
    folder = getattr(session.config, "workerinput", {}).get(_KEY)
    if folder is None:
        return
    worker = session.config.workerinput["workerid"]
    path = Path(folder) / f"{worker}.json"
    path.with_suffix(".tmp").write_text(json.dumps(units_of(session.items)))
    os.replace(path.with_suffix(".tmp"), path)


_SUITE = Path(__file__).resolve().parent
_ORDER = pytest.StashKey[list[Path]]()  # the suite folder's entries, in pytest's order


class _RoundDir(pytest.Dir):
    """The suite's folder, its entries collected from this worker's own starting point."""

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        children = list(super().collect())
        self.config.stash[_ORDER] = [c.path for c in children]
        worker = self.config.workerinput  # type: ignore[attr-defined]
        share = int(worker["workerid"].removeprefix("gw")) / int(worker["workercount"])
        sizes = [_size(c.path) for c in children]
        before = [sum(sizes[:n]) for n in range(len(sizes))]
        start = next((n for n, b in enumerate(before) if b >= share * sum(sizes)), 0)
        return children[start:] + children[:start]


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("test_*.py"))


class _RoundCollection:
    """(worker) A plugin, not a conftest hook: pytest asks the conftests of a folder's
    parent, not its own, how to collect it."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_collect_directory(
        self, path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        if path != _SUITE:
            return None
        return _RoundDir.from_parent(parent, path=path)


def pytest_configure(config: pytest.Config) -> None:
    """(worker) The suite's folder is collected from this worker's starting point."""
    if hasattr(config, "workerinput"):
        config.pluginmanager.register(_RoundCollection(), "treadle-round-collection")


def in_suite_order(config: pytest.Config, items: list[pytest.Item]) -> None:
    """(worker) Put the tests back in the order pytest collects them in (a stable sort by
    the suite folder's entry each is under: each entry's tests were collected together)."""
    order = config.stash.get(_ORDER, None)
    if order is None:
        return
    rank = {path: n for n, path in enumerate(order)}

    def entry(item: pytest.Item) -> int:
        relative = item.path.relative_to(_SUITE)
        return rank[_SUITE / relative.parts[0]]

    items.sort(key=entry)


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = getattr(config, "_treadle_units", None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """(controller) ``--dist loadgroup`` schedules units as described above."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """xdist's scope scheduling (a scope runs on one worker) with our units as the
        scopes, in our order."""

        unit_of: dict[str, str] | None = None
        ordered: list[str] = []

        def _load(self) -> dict[str, str]:
            if self.unit_of is None:
                folder = getattr(config, "_treadle_units", None)
                found = sorted(Path(folder).glob("*.json")) if folder else []
                units = json.loads(found[0].read_text()) if found else []
                # slow first; then larger before smaller; collection order otherwise
                units.sort(key=lambda u: (-u["slow"], -len(u["tests"])))
                self.ordered = [u["name"] for u in units]
                self.unit_of = {test: u["name"] for u in units for test in u["tests"]}
            return self.unit_of

        def _split_scope(self, nodeid: str) -> str:
            return self._load().get(nodeid, nodeid)

        def mark_test_complete(self, node: Any, item_index: int | str, duration: float = 0) -> None:
            """xdist's, and a unit whose tests have all run is dropped from the worker's
            assigned work: xdist counts the pending tests of every unit a worker was ever
            given at each test's end (quadratic in the suite: seconds of the controller's
            CPU), and only unfinished units have any."""
            nodeid = self.registered_collections[node][item_index]
            assigned = self.assigned_work[node]
            unit = self._split_scope(nodeid)
            assigned[unit][nodeid] = True
            if all(assigned[unit].values()):
                del assigned[unit]
            self._reschedule(node)

        def schedule(self) -> None:
            if self.collection is not None or not self.collection_is_completed:
                super().schedule()
                return
            if not self._check_nodes_have_same_collection():
                self.log("**Different tests collected, aborting run**")
                return
            self.collection = list(next(iter(self.registered_collections.values())))
            if not self.collection:
                return
            scopes: dict[str, dict[str, bool]] = {}
            for nodeid in self.collection:
                scopes.setdefault(self._split_scope(nodeid), {})[nodeid] = False
            rank = {name: n for n, name in enumerate(self.ordered)}
            for scope in sorted(scopes, key=lambda s: rank.get(s, len(rank))):
                self.workqueue[scope] = scopes[scope]
            for _ in range(len(self.nodes) - len(self.workqueue)):
                unused, _assigned = self.assigned_work.popitem()
                unused.shutdown()
            for node in self.nodes:
                self._assign_work_unit(node)
            # a worker runs a test once it knows the next one: give each a second unit
            for node in self.nodes:
                self._reschedule(node)
            if not self.workqueue:
                for node in self.nodes:
                    node.shutdown()

    return UnitScheduling(config, log)

"""The event log's write, run through the database driver.

An event-log write stores a few rows in up to three tables, fenced by the run's owner
(:mod:`._owner`), in one transaction. Built and compiled by SQLAlchemy each statement costs
more than the database's own work, and each statement sent on its own is a round trip to a
server. So the write is SQL text, made once per shape (how many rows of each kind):

- PostgreSQL: **one statement**, sent in autocommit mode on an async connection
  (:mod:`._pgwrite`: one round trip, one transaction, no thread): the owner check is a
  data-modifying CTE whose row every insert requires (``WHERE EXISTS``), so a fenced write
  stores nothing; the statement returns what the check found.
- SQLite: the check, then one multi-row ``INSERT`` per table, in one transaction (the
  database is in process: statements cost no round trip).

The owner check also looks at DBOS's own record of the workflow (its documented system
table ``workflow_status``): a run ``cancel()`` marked ``CANCELLED`` stores nothing more, as
DBOS refuses a cancelled workflow's next step. A run of idempotent tools takes no DBOS step,
so this is where it learns of the cancel.

Only the two drivers :mod:`._database` opens are written for: sqlite3 (``?``
placeholders) and psycopg (``%s``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlalchemy as sa

CHUNK = 200  # rows per INSERT: far below any driver's limit on parameters
_MARKS = {"qmark": "?", "format": "%s", "pyformat": "%s"}
_SHAPES = 512  # statement texts kept (one per shape seen; a run has a handful)
_CACHE: dict[tuple[Any, ...], str] = {}

OK, FENCED, CANCELLED = "ok", "fenced", "cancelled"
"""What a write with an owner check found: stored; refused, another execution owns the run;
refused, the run was cancelled."""

OWNERS = "treadle_durable_owners"
KEPT = f"UPDATE {OWNERS} SET epoch = epoch WHERE workflow_id = ? AND epoch = ?"
"""The owner check: still this execution's epoch (and the row's lock, held to the end)."""
FIRST = f"INSERT INTO {OWNERS} (workflow_id, epoch) VALUES (?, 1) ON CONFLICT DO NOTHING"
"""A fresh run's claim, in its first write: none there yet (else another execution's)."""
SQLITE_STATUS = "SELECT status FROM workflow_status WHERE workflow_uuid = ?"
"""DBOS's record of the workflow (SQLite keeps DBOS's tables in the same file, no schema)."""
_PG_LIVE = (
    "live AS (SELECT 1 WHERE NOT EXISTS (SELECT FROM dbos.workflow_status"
    " WHERE workflow_uuid = %s AND status = 'CANCELLED'))"
)
_PG_FIRST = (
    f"INSERT INTO {OWNERS} (workflow_id, epoch) SELECT %s, 1 WHERE EXISTS (SELECT FROM live)"
    " ON CONFLICT DO NOTHING RETURNING 1"
)
_PG_KEPT = (
    f"UPDATE {OWNERS} SET epoch = epoch WHERE workflow_id = %s AND epoch = %s"
    " AND EXISTS (SELECT FROM live) RETURNING 1"
)


def _mark(dialect: sa.Dialect) -> str:
    style = dialect.paramstyle
    if style not in _MARKS:  # _database opens sqlite3 and psycopg only
        raise NotImplementedError(f"a database driver with paramstyle {style!r}")
    return _MARKS[style]


def _memo(key: tuple[Any, ...], make: Any) -> str:
    text = _CACHE.get(key)
    if text is None:
        if len(_CACHE) >= _SHAPES:
            _CACHE.clear()
        text = _CACHE[key] = make()
    return text


def _marked(sql: str, dialect: sa.Dialect) -> str:
    """``sql`` (written with ``?`` placeholders) in the driver's placeholder style."""
    return _memo((sql, dialect.name), lambda: sql.replace("?", _mark(dialect)))


def run(conn: sa.Connection, sql: str, params: tuple[Any, ...]) -> Any:
    """``sql`` (written with ``?`` placeholders) with ``params``, through ``conn``."""
    return conn.exec_driver_sql(_marked(sql, conn.dialect), params)


def _values(mark: str, table: sa.Table, count: int, typed: bool) -> str:
    one = "(" + ", ".join([mark] * len(table.columns)) + ")"
    if not typed:
        return ", ".join([one] * count)
    # PostgreSQL types a VALUES list's columns by its first row: their types go there
    types = ["integer" if c.type.python_type is int else "text" for c in table.columns]
    first = "(" + ", ".join(f"{mark}::{t}" for t in types) + ")"
    return ", ".join([first, *[one] * (count - 1)])


def _insert(table: sa.Table, values: str, guard: str = "") -> str:
    names = ", ".join(c.name for c in table.columns)
    if not guard:
        return f"INSERT INTO {table.name} ({names}) VALUES {values}"
    return (
        f"INSERT INTO {table.name} ({names}) SELECT * FROM (VALUES {values}) AS v ({names}){guard}"
    )


def write_log(
    engine: sa.Engine, claim: tuple[str, int] | None, workflow_id: str, parts: list[Any]
) -> str:
    """SQLite: insert ``parts`` (:func:`chunks`: a table, its rows with values in column
    order) in one transaction, with ``claim`` (``("first", 1)``: a fresh run's first write
    claims it; ``("kept", epoch)``: the owner check) when given. :data:`OK`, or what
    refused the write (:data:`FENCED`, :data:`CANCELLED`): then nothing was stored.
    (PostgreSQL's write is :class:`._pgwrite.Writers`'.)"""
    raw = engine.raw_connection()
    try:
        return _sqlite(raw, engine.dialect, claim, workflow_id, parts)
    finally:
        raw.close()  # back to the pool


def statement(
    claim: tuple[str, int] | None, workflow_id: str, parts: list[Any]
) -> tuple[str, list[Any]]:
    """One PostgreSQL statement (its text, its parameters): the owner check and the inserts
    it guards. Its one row is read by :func:`found`."""
    shape = tuple((table.name, len(rows)) for table, rows in parts)
    kind = claim[0] if claim is not None else None

    def make() -> str:
        ctes = []
        if kind is not None:
            ctes += [_PG_LIVE, f"owner AS ({_PG_FIRST if kind == 'first' else _PG_KEPT})"]
        guard = " WHERE EXISTS (SELECT FROM owner)" if kind is not None else " WHERE true"
        for i, (table, rows) in enumerate(parts):
            values = _values("%s", table, len(rows), typed=True)
            ctes.append(f"i{i} AS ({_insert(table, values, guard)})")
        result = "1, 1"
        if kind is not None:
            result = "(SELECT count(*) FROM owner), (SELECT count(*) FROM live)"
        return ("WITH " + ", ".join(ctes) + " " if ctes else "") + f"SELECT {result}"

    sql = _memo(("postgresql", kind, shape), make)
    params: list[Any] = []
    if claim is not None:
        params += [workflow_id, workflow_id] + ([] if kind == "first" else [claim[1]])
    for _, rows in parts:
        params += [value for row in rows for value in row]
    return sql, params


def found(row: tuple[Any, ...]) -> str:
    """What a statement's check found, from its row (owned, not cancelled)."""
    owned, live = row
    return OK if owned == 1 else CANCELLED if live == 0 else FENCED


def chunks(inserts: list[tuple[sa.Table, list[tuple[Any, ...]]]]) -> list[Any]:
    """``inserts`` cut into parts of at most :data:`CHUNK` rows."""
    return [
        (table, rows[i : i + CHUNK]) for table, rows in inserts for i in range(0, len(rows), CHUNK)
    ]


GROUP = 30
"""Chunks of rows one PostgreSQL statement takes (24,000 parameters at most: the protocol
allows 65,535). A write of more rows is several statements in one transaction."""


def groups(claim: tuple[str, int] | None, parts: list[Any]) -> list[tuple[Any, list[Any]]]:
    """The statements of a PostgreSQL write (each with its owner check): one, or, for more
    rows than one takes, several for one transaction (the first claims a fresh run, the
    next ones check the claim it made)."""
    cut = [parts[i : i + GROUP] for i in range(0, len(parts), GROUP)] or [[]]
    out = []
    for i, group in enumerate(cut):
        check = claim
        if claim is not None and i > 0:
            check = ("kept", 1 if claim[0] == "first" else claim[1])
        out.append((check, group))
    return out


def _sqlite(
    raw: Any,
    dialect: sa.Dialect,
    claim: tuple[str, int] | None,
    workflow_id: str,
    parts: list[Any],
) -> str:
    mark = _mark(dialect)
    cursor = raw.cursor()
    try:
        if claim is not None:
            cursor.execute(_marked(SQLITE_STATUS, dialect), (workflow_id,))
            status = cursor.fetchone()
            if status is not None and status[0] == "CANCELLED":
                raw.rollback()
                return CANCELLED
            kind, epoch = claim
            if kind == "first":
                cursor.execute(_marked(FIRST, dialect), (workflow_id,))
            else:
                cursor.execute(_marked(KEPT, dialect), (workflow_id, epoch))
            if cursor.rowcount != 1:
                raw.rollback()
                return FENCED
        for table, rows in parts:

            def make(table: sa.Table = table, count: int = len(rows)) -> str:
                return _insert(table, _values(mark, table, count, typed=False))

            sql = _memo(("sqlite", table.name, len(rows)), make)
            cursor.execute(sql, tuple(value for row in rows for value in row))
        raw.commit()
        return OK
    except BaseException:
        raw.rollback()
        raise
    finally:
        cursor.close()

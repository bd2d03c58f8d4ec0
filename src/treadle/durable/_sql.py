"""Statements on the durable tables' hot path, run through the database driver.

An event-log write runs a few small statements in one transaction. Built and compiled by
SQLAlchemy each costs more than the database's own work, and a driver's ``executemany``
(psycopg's pipeline) a round per row: these are written once as SQL text in the driver's
placeholder style (sqlite3's ``?``, psycopg's ``%s``: the only two drivers
:mod:`._database` opens), and rows go in one multi-row ``INSERT`` per chunk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlalchemy as sa

_MARKS = {"qmark": "?", "format": "%s", "pyformat": "%s"}
CHUNK = 200  # rows per INSERT: far below any driver's limit on parameters
_CACHE: dict[tuple[str, str, int], str] = {}


def _mark(conn: sa.Connection) -> str:
    style = conn.dialect.paramstyle
    if style not in _MARKS:  # _database opens sqlite3 and psycopg only
        raise NotImplementedError(f"a database driver with paramstyle {style!r}")
    return _MARKS[style]


def run(conn: sa.Connection, sql: str, params: tuple[Any, ...]) -> Any:
    """``sql`` (written with ``?`` placeholders) with ``params``."""
    key = (sql, conn.dialect.name, -1)
    text = _CACHE.get(key)
    if text is None:
        text = _CACHE[key] = sql.replace("?", _mark(conn))
    return conn.exec_driver_sql(text, params)


def insert_rows(conn: sa.Connection, table: sa.Table, rows: list[tuple[Any, ...]]) -> None:
    """``rows`` (values in the table's column order) into ``table``."""
    dialect = conn.dialect
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start : start + CHUNK]
        key = (table.name, dialect.name, len(chunk))
        sql = _CACHE.get(key)
        if sql is None:
            quote, mark = dialect.identifier_preparer.quote, _mark(conn)
            columns = ", ".join(quote(c.name) for c in table.columns)
            one = "(" + ", ".join([mark] * len(table.columns)) + ")"
            values = ", ".join([one] * len(chunk))
            sql = _CACHE[key] = f"INSERT INTO {quote(table.name)} ({columns}) VALUES {values}"
        conn.exec_driver_sql(sql, tuple(value for row in chunk for value in row))

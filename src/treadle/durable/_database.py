"""The durable runs' database URL: defaults, a connect timeout, checks with clear errors.

Supported: ``sqlite:///path`` (one machine) and ``postgresql://`` (``postgres://``) for
many workers. A PostgreSQL URL gets ``connect_timeout`` (seconds) unless it names one, so
a server that accepts and never answers fails :func:`~treadle.durable.launch` instead of
hanging it; a database that does not exist is created (``CREATE DATABASE`` on the server's
``postgres`` database), or the error says to create it. Errors name the URL without its
password.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import TreadleError

if TYPE_CHECKING:
    import sqlalchemy as sa

DEFAULT_DATABASE = "sqlite:///treadle_durable.sqlite"
DEFAULT_CONNECT_TIMEOUT_S = 10
SUPPORTED = ("sqlite:///PATH", "postgresql://USER@HOST:PORT/DB", "postgres://...")


class DurableError(TreadleError, RuntimeError):
    """A durable run cannot go on as asked: not connected, no queue, an unknown agent (the
    message says what to do)."""


class DatabaseError(DurableError):
    """The durable runs' database cannot be used (the message says which and why)."""


def resolve(database_url: str | None, connect_timeout_s: float | None) -> str:
    """The URL to use: the argument, ``$TREADLE_DURABLE_DB`` or the SQLite default; a
    PostgreSQL URL with a ``connect_timeout`` (its own, else ``connect_timeout_s``)."""
    url = database_url or os.environ.get("TREADLE_DURABLE_DB") or DEFAULT_DATABASE
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme == "sqlite":
        if not url.startswith("sqlite:///") or url == "sqlite:///":
            raise DatabaseError(
                f"bad SQLite URL {url!r}: write sqlite:///relative/path.sqlite or "
                "sqlite:////absolute/path.sqlite"
            )
        return url
    if scheme not in ("postgresql", "postgres", "postgresql+psycopg"):
        raise DatabaseError(
            f"unsupported database {redact(url)!r}: treadle.durable runs on SQLite or "
            f"PostgreSQL ({', '.join(SUPPORTED)})"
        )
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    if "connect_timeout" not in query:
        timeout = DEFAULT_CONNECT_TIMEOUT_S if connect_timeout_s is None else connect_timeout_s
        query["connect_timeout"] = str(max(1, round(timeout)))
    return urlunsplit(parts._replace(query=urlencode(query)))


def redact(url: str) -> str:
    """``url`` without its password."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.rsplit("@", 1)
        user = netloc[0].split(":", 1)[0]
        return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))
    except ValueError:
        return "<a database URL>"


def engine_url(url: str) -> str:
    """The SQLAlchemy URL: PostgreSQL through psycopg 3 (the driver DBOS uses)."""
    scheme, rest = url.split("://", 1)
    if scheme.lower() in ("postgresql", "postgres"):
        return "postgresql+psycopg://" + rest
    return url


def sqlite_path(url: str) -> str:
    return url.split("?", 1)[0].removeprefix("sqlite:///")


def open_engine(url: str) -> sa.Engine:
    """An engine on ``url``, checked by connecting once (creating a missing PostgreSQL
    database); :class:`DatabaseError` naming the URL or path when that fails."""
    import sqlalchemy as sa

    if url.startswith("sqlite"):
        path = sqlite_path(url)
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise DatabaseError(
                f"cannot open the SQLite database {path!r}: the folder {folder!r} does not "
                "exist (create it, or pass another sqlite:/// path)"
            )
        engine = sa.create_engine(url, connect_args={"timeout": 30})
        sa.event.listen(engine, "connect", _write_ahead_log)
    else:
        engine = sa.create_engine(engine_url(url))
    try:
        _check(engine)
    except sa.exc.OperationalError as exc:
        engine.dispose()
        if url.startswith("sqlite"):
            raise DatabaseError(
                f"cannot open the SQLite database {sqlite_path(url)!r}: {exc.orig}"
            ) from None
        if "does not exist" in str(exc.orig) and "database" in str(exc.orig):
            _create_database(url)
            engine = sa.create_engine(engine_url(url))
            try:
                _check(engine)
            except sa.exc.OperationalError as again:
                raise DatabaseError(
                    f"cannot connect to {redact(url)}: {_first_line(again.orig)}"
                ) from None
        else:
            raise DatabaseError(
                f"cannot connect to {redact(url)}: {_first_line(exc.orig)} (is the server up? "
                "connect_timeout in the URL or connect_timeout_s= sets how long to wait)"
            ) from None
    return engine


def _write_ahead_log(dbapi_connection: Any, record: Any) -> None:
    """SQLite in WAL mode (kept by the file, so DBOS's connections use it too): a commit
    syncs one append to the log instead of a journal and the database, and readers do not
    block the writer. As durable: a commit is on disk when it returns."""
    dbapi_connection.execute("PRAGMA journal_mode=WAL")


def _check(engine: sa.Engine) -> None:
    import sqlalchemy as sa

    with engine.connect() as conn:
        conn.execute(sa.text("SELECT 1"))


def _first_line(error: Any) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _create_database(url: str) -> None:
    import sqlalchemy as sa

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    engine = sa.create_engine(engine_url(admin), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            quoted = '"' + name.replace('"', '""') + '"'
            conn.execute(sa.text(f"CREATE DATABASE {quoted}"))
    except sa.exc.SQLAlchemyError as exc:
        if "already exists" in str(exc):
            return  # another worker created it meanwhile
        raise DatabaseError(
            f"the database {name!r} does not exist on {redact(admin)} and could not be "
            f"created ({_first_line(getattr(exc, 'orig', exc))}): create it "
            f"(CREATE DATABASE {name}) or use a user allowed to"
        ) from None
    finally:
        engine.dispose()

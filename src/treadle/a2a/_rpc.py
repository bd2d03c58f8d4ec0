"""What treadle does at the JSON-RPC door before (and after) the a2a-sdk's dispatcher: the
protocol version a request without ``A2A-Version`` speaks, a ``ListTasks`` status filter
that names no state, and the errors of the streaming methods, answered as the event
stream those methods promise."""

from __future__ import annotations

import json
from typing import Any

from a2a.server.request_handlers import build_error_response
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import TaskState
from a2a.utils.errors import InvalidParamsError
from starlette.responses import JSONResponse
from starlette.routing import request_response

from ..ui import load_json

V1_METHODS = frozenset(JsonRpcDispatcher.METHOD_TO_MODEL)
STREAMING_METHODS = frozenset(
    {"SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"}
)
_STATE_NAMES = frozenset(TaskState.keys())
_STATE_NUMBERS = frozenset(TaskState.values())


def rpc_front(endpoint: Any) -> Any:
    """The sdk's JSON-RPC ``endpoint`` as an ASGI app, with treadle's door in front:

    - a request without an ``A2A-Version`` header that names a 1.0 method
      (``SendMessage``) is taken as the 1.0 request it is (the sdk reads a missing header
      as 0.3 and refuses it, though the two versions' method names never overlap);
    - ``ListTasks`` with a ``status`` that is no task state is refused (``-32602``): the
      sdk's parser would read it as no filter at all and list every task;
    - an error answering a streaming method (``SendStreamingMessage``,
      ``SubscribeToTask``: an unknown task, say) comes as the one event of an event
      stream, as the JSON-RPC binding answers those methods, not as a JSON body.
    """
    app = request_response(endpoint)

    async def front(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # pragma: no cover - the route is http only
            await app(scope, receive, send)
            return
        first = await receive()  # the guard has read the whole body: one message
        request = _request_of(first.get("body", b""))
        method = request.get("method") if isinstance(request.get("method"), str) else None
        refused = _refusal(method, request)
        if refused is not None:
            response = JSONResponse(build_error_response(_request_id(request), refused))
            await response(scope, receive, send)
            return
        headers = scope.get("headers", [])
        if method in V1_METHODS and not any(k.lower() == b"a2a-version" for k, _ in headers):
            scope = dict(scope, headers=[*headers, (b"a2a-version", b"1.0")])
        if method in STREAMING_METHODS:
            send = _errors_as_events(send)
        given = False

        async def replay() -> Any:
            nonlocal given
            if not given:
                given = True
                return first
            return await receive()

        await app(scope, replay, send)

    return front


def _request_of(body: bytes) -> dict[str, Any]:
    try:
        value = load_json(body)
    except ValueError:
        return {}  # the sdk answers it (a parse error)
    return value if isinstance(value, dict) else {}


def _request_id(request: dict[str, Any]) -> str | int | None:
    found = request.get("id")
    return found if isinstance(found, (str, int)) and not isinstance(found, bool) else None


def _refusal(method: str | None, request: dict[str, Any]) -> InvalidParamsError | None:
    """What treadle refuses before the sdk parses the request (``None``: nothing)."""
    if method != "ListTasks":
        return None
    params = request.get("params")
    status = params.get("status") if isinstance(params, dict) else None
    if status is None or (isinstance(status, str) and status in _STATE_NAMES):
        return None
    if isinstance(status, int) and not isinstance(status, bool) and status in _STATE_NUMBERS:
        return None
    shown = json.dumps(status)[:80]
    return InvalidParamsError(
        message=f"status {shown} is not a task state: give one of "
        f"{', '.join(n for n in TaskState.keys() if n != 'TASK_STATE_UNSPECIFIED')}, "
        "or no status to list tasks in every state"
    )


def _errors_as_events(send: Any) -> Any:
    """``send`` for a streaming method: a JSON answer (an error the sdk raised before the
    stream began) goes out as one ``data:`` event of a ``text/event-stream`` instead, the
    way the sdk itself reports an error in the middle of a stream."""
    held: dict[str, Any] | None = None
    body = b""

    async def sending(message: Any) -> None:
        nonlocal held, body
        if message["type"] == "http.response.start" and _is_json(message):
            held = message
            return
        if held is None or message["type"] != "http.response.body":
            await send(message)
            return
        body += message.get("body", b"")
        if message.get("more_body", False):
            return
        event = b"".join(b"data: " + line + b"\n" for line in body.splitlines()) + b"\n"
        headers = [
            (k, v)
            for k, v in held.get("headers", [])
            if k.lower() not in (b"content-type", b"content-length")
        ]
        headers += [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"content-length", str(len(event)).encode()),
            (b"cache-control", b"no-store"),
        ]
        await send({**held, "headers": headers})
        await send({"type": "http.response.body", "body": event, "more_body": False})

    return sending


def _is_json(start: Any) -> bool:
    for key, value in start.get("headers", []):
        if key.lower() == b"content-type":
            return bool(value.lower().startswith(b"application/json"))
    return False

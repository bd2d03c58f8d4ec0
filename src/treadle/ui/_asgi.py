"""The Starlette app both UI protocols serve (extra ``web``; imported only when an app is
built)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from ..errors import MissingExtra, install_hint
from ._guard import HTTPGuard, load_json
from ._runs import LiveRun, RequestError, UIRuns

StartRun = Callable[[UIRuns, Any], LiveRun]
StreamRun = Callable[[LiveRun, "str | None"], AsyncIterator[bytes]]
FindRun = Callable[[UIRuns, Mapping[str, Any], "str | None"], "LiveRun | None"]


def build_app(
    runs: UIRuns,
    start: StartRun,
    stream: StreamRun,
    *,
    path: str,
    reconnect_path: str,
    find: FindRun,
    headers: Mapping[str, str] | None = None,
    guard: Mapping[str, Any],
) -> Any:
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route, request_response
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtra(
            f"the treadle.ui ASGI apps need Starlette: {install_hint('web')}"
        ) from exc

    base_headers = {"cache-control": "no-cache", "x-accel-buffering": "no", **(headers or {})}

    def sse(live: LiveRun, cursor: str | None) -> Response:
        return StreamingResponse(
            stream(live, cursor), media_type="text/event-stream", headers=base_headers
        )

    def cursor_of(request: Request) -> str | None:
        return request.headers.get("last-event-id") or request.query_params.get("after")

    async def post(request: Request) -> Response:
        try:
            body = load_json(await request.body())
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        try:
            live = start(runs, body)
        except RequestError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        return sse(live, cursor_of(request))

    async def reconnect(request: Request) -> Response:
        cursor = cursor_of(request)
        live = find(runs, request.path_params, cursor)
        if live is None:
            return Response(status_code=204)
        return sse(live, cursor)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with runs.serving():
            yield

    def guarded(endpoint: Callable[[Request], Any]) -> HTTPGuard:
        # on each route, so the guard goes wherever the routes are mounted
        return HTTPGuard(request_response(endpoint), **guard)

    app = Starlette(
        routes=[
            Route(path, guarded(post), methods=["POST"]),
            Route(reconnect_path, guarded(reconnect), methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.runs = runs
    return app

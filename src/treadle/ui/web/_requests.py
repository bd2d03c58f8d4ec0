"""What the model was sent, for the inspector: a hook the web app adds to each run records
every model request (system prompt, tool schemas, messages, settings) as it leaves the
``before_model_request`` hooks, as a custom event on the run's stream. Masked like every
other inspector event; left out of the chat's frames."""

from __future__ import annotations

from typing import Any

from ...loop import Hooks, RunHandle
from ...providers import ModelRequest

REQUEST_EVENT = "treadle.ui.model_request"


def request_view(request: ModelRequest) -> dict[str, Any]:
    """A request as JSON, as the provider adapter gets it (the wire format aside), with
    each file's and image's bytes left out (their type, name and size stay): a file sent on
    every turn would otherwise be copied into every turn's event."""
    view: dict[str, Any] = request.model_dump(mode="json", exclude={"coalesce_deltas"})
    for message in view.get("messages") or []:
        for block in message.get("content") or [] if isinstance(message, dict) else []:
            data = block.get("data") if isinstance(block, dict) else None
            if block.get("type") in ("file", "image") and isinstance(data, str):
                padding = len(data) - len(data.rstrip("="))
                block["data"] = None
                block["size"] = len(data) * 3 // 4 - padding
    return view


class RequestView(Hooks):
    """Records each model request of a run (turns and side calls, by ``purpose``). Added
    after the agent's own hooks, so it sees a request after they edited it."""

    async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
        await run.emit(REQUEST_EVENT, request_view(request))
        return request

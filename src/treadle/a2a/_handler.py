"""The a2a-sdk's request handler, with what treadle's server answers differently."""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import ListTasksRequest, ListTasksResponse


class TreadleRequestHandler(DefaultRequestHandler):
    """The sdk's ``DefaultRequestHandler`` (tasks kept in its task store, streams, the
    executor's runs), answering ``ListTasks`` as A2A 1.0 asks: ``pageSize`` is the size of
    the page returned (``0`` for no task), not the size asked for. The store does the rest
    — filters, newest status first, ``pageToken`` cursors, ``totalSize`` — and the sdk
    checks ``pageSize`` (1 to 100, 50 unless given) and ``historyLength``, and leaves the
    artifacts out unless ``includeArtifacts``."""

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        page: ListTasksResponse = await super().on_list_tasks(params, context)
        page.page_size = len(page.tasks)
        return page

"""One path for every model call: the settings a request carries, and side calls.

A *turn* of the loop and every *side call* — the planning request, a compaction summary, a
post-run worker's call — build their request from the same settings (:func:`settings_of`),
go through the config's ``before_model_request`` hooks, and stream through the same code
(``stream_message``) under the config's ``RetryPolicy``. A side call's answer is not a
message of the history, so it sends no event on the run's stream (where it happens — before
``agent_start``, inside a turn, just before ``agent_end`` — the contract allows none); its
retries and its failure are logged (logger ``treadle.loop``) and its answer says how it ended
(``stop_reason`` ``error`` with ``error`` filled in, or ``aborted`` when cancelled).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from typing import Any

from .._signals import HookFailed
from ..cancellation import CancelBridge, CancellationToken
from ..providers.base import ModelRequest, Provider
from ..types import AgentMessage, AssistantMessage, ProviderRetry
from ._bounds import StreamBounds
from ._dispatch import hook_dispatch, hook_name
from ._streaming import StreamState, stream_message
from .config import AgentLoopConfig, RunHandle
from .context import AgentContext
from .settings import settings_of
from .sink import EventSink

logger = logging.getLogger("treadle.loop")


def side_request(
    config: AgentLoopConfig,
    messages: Sequence[AgentMessage],
    *,
    purpose: str,
    system_prompt: str | None = None,
    provider: Provider | None = None,
    model: str | None = None,
    max_tokens: int | None = None,
) -> ModelRequest:
    """A tool-free request with ``config``'s settings: ``model`` (default the config's) and
    ``max_tokens`` (default the config's) override; no tools, no tool choice and no
    response format (a side call's answer is free text)."""
    same = provider is None or provider is config.provider
    settings = settings_of(config, same_provider=same)
    if max_tokens is not None:
        settings["max_tokens"] = max_tokens
    return ModelRequest.model_construct(
        model=model or config.model_name,
        system_prompt=system_prompt,
        messages=[m for m in messages if m.role != "extension"],
        tools=[],
        tool_choice=None,
        response_format=None,
        purpose=purpose,
        **settings,
    )


async def call_model(
    config: AgentLoopConfig,
    request: ModelRequest,
    *,
    provider: Provider | None = None,
    cancel: CancellationToken | None = None,
    run: RunHandle | None = None,
) -> AssistantMessage:
    """Make one side call: ``request`` (see :func:`side_request`) through ``config``'s
    ``before_model_request`` hooks, then streamed to ``provider`` (default the config's)
    under ``config.retry``, exactly as a turn's call. Returns the answer; a failure after the
    retries is an answer with ``stop_reason="error"``, a cancellation (``cancel``, or the
    enclosing scope through it) one with ``stop_reason="aborted"`` — it never raises a
    ``ProviderError``. A hook that raises raises ``HookFailed``, as in a turn. ``run``: the
    run the call is made for (a hook's ``run``), handed to the hooks; without it they get
    a :meth:`RunHandle.detached` one."""
    provider = provider or config.provider
    hooks = hook_dispatch(config).before_model_request
    if hooks and run is None:
        run = RunHandle.detached(AgentContext(), config)
    for fn in hooks:
        try:
            edited: Any = fn(run, request)
            if inspect.isawaitable(edited):
                edited = await edited
        except Exception as exc:
            raise HookFailed(hook_name(fn), exc) from exc
        if isinstance(edited, ModelRequest):
            request = edited
    name = getattr(provider, "name", type(provider).__name__)
    purpose = getattr(request, "purpose", "side call")

    def log_retry(event: Any) -> None:
        if isinstance(event, ProviderRetry):
            logger.warning(
                "the %s call to %s failed (%s), retry %s of %s in %.1fs: %s",
                purpose,
                name,
                event.error_kind,
                event.attempt,
                event.max_retries,
                event.delay_s,
                event.message,
            )

    async def keep(message: AssistantMessage) -> None:
        return None

    sink = EventSink(None, "", 0, observers=[log_retry])
    state = StreamState(request, name, snapshots=False)
    bridge = CancelBridge(cancel)
    # the limits of one model call hold for side calls too: a stream gone quiet (max_idle_s)
    # or too long (max_call_duration_s) is cut and retried as a turn's call is
    limits = config.limits
    bounds = StreamBounds(None, None, limits.max_idle_s, limits.max_call_duration_s)
    message: AssistantMessage | None = None
    try:
        with bridge.scope():
            message = await stream_message(
                provider,
                request,
                sink,
                config.retry,
                state,
                bridge.token,
                keep,
                text_only=True,
                bounds=bounds,
            )
    finally:
        bridge.close()
    if message is None:  # cancelled mid-stream: the scope stopped it
        message = state.closed("aborted")
    if message.stop_reason == "error" and message.error is not None:
        logger.warning(
            "the %s call to %s failed (%s): %s",
            purpose,
            name,
            message.error.kind,
            message.error.message,
        )
    return message

"""Prompt caching on Bedrock: ``cachePoint`` blocks where Anthropic puts ``cache_control``
(docs/cloud.md#aws-bedrock, docs/providers.md#prompt-caching)."""

from __future__ import annotations

from typing import Any

from .base import ModelRequest

MAX_POINTS = 4  # Bedrock's limit per request, as Anthropic's
# The model families that take cache points (others refuse the block), and where.
_TOOLS = {"anthropic"}
_TAKES = {"anthropic", "nova"}


def cache_block(request: ModelRequest, family: str) -> dict[str, Any] | None:
    """The ``cachePoint`` block a request's retention asks for, or None (off, or a model
    family without prompt caching)."""
    if request.prompt_cache == "off" or family not in _TAKES:
        return None
    point: dict[str, Any] = {"type": "default"}
    if request.prompt_cache == "long" and family == "anthropic":
        point["ttl"] = "1h"
    return {"cachePoint": point}


def place(body: dict[str, Any], request: ModelRequest, family: str) -> None:
    """The automatic points (the end of the tools, of the system prompt, of the last user
    turn) and the explicit ones already in ``body`` (messages, tools), four at most: the
    automatic ones kept, then the explicit ones from the end of the prompt back."""
    point = cache_block(request, family)
    if point is None:
        return
    tools: list[dict[str, Any]] = body.get("toolConfig", {}).get("tools", [])
    explicit_tools = [block for block in tools if "cachePoint" in block]
    if family not in _TOOLS:  # Nova caches the system prompt and messages only
        tools[:] = [block for block in tools if "cachePoint" not in block]
        explicit_tools = []
    explicit_messages = [
        (turn, block)
        for turn in body["messages"]
        for block in turn["content"]
        if "cachePoint" in block
    ]
    automatic = 0
    if tools and family in _TOOLS:
        if "cachePoint" in tools[-1]:  # the explicit point on the last tool: the automatic one
            explicit_tools = [b for b in explicit_tools if b is not tools[-1]]
        else:
            tools.append(dict(point))
        automatic += 1
    if body.get("system"):
        body["system"].append(dict(point))
        automatic += 1
    users = [turn for turn in body["messages"] if turn["role"] == "user"]
    if users:
        last = users[-1]["content"]
        if "cachePoint" in last[-1]:  # already marked: that point is the automatic one
            explicit_messages = [(t, b) for t, b in explicit_messages if b is not last[-1]]
        else:
            last.append(dict(point))
        automatic += 1
    budget = max(0, MAX_POINTS - automatic)
    kept = [*reversed(explicit_messages), *((None, b) for b in reversed(explicit_tools))]
    for turn, block in kept[budget:]:
        holder = turn["content"] if turn is not None else tools
        holder[:] = [b for b in holder if b is not block]

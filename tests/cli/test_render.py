"""Rendering prints model text as it is: never parsed as markup, thinking dimmed."""

from __future__ import annotations

import io

import pytest

from treadle.cli.render import Renderer
from treadle.types import AssistantMessage, MessageUpdate, TextDelta, ThinkingDelta

TRICKY = "Wrap it in [dim] ... [/bold] tags, or [red]this[/red]."
MESSAGE = AssistantMessage()


def updates() -> list[MessageUpdate]:
    return [
        MessageUpdate(message=MESSAGE, delta=TextDelta(index=0, text=TRICKY)),
        MessageUpdate(message=MESSAGE, delta=ThinkingDelta(index=1, text=" and [b]thinking[/b]")),
    ]


def test_plain_renderer_prints_text_verbatim() -> None:
    out = io.StringIO()
    renderer = Renderer(out)
    for event in updates():
        renderer.event(event)
    assert out.getvalue() == TRICKY + " and [b]thinking[/b]"


def test_rich_renderer_prints_markup_like_text_verbatim() -> None:
    pytest.importorskip("rich")
    from treadle.cli.render import RichRenderer

    out = io.StringIO()
    renderer = RichRenderer(out)
    for event in updates():  # raised rich.errors.MarkupError before
        renderer.event(event)
    assert TRICKY in out.getvalue() and "[b]thinking[/b]" in out.getvalue()


def test_a_fallback_is_one_dim_line_naming_both_models() -> None:
    from treadle.types import ProviderFallback

    out = io.StringIO()
    Renderer(out).event(
        ProviderFallback(
            from_provider="anthropic",
            from_model="claude-sonnet-4-5",
            to_provider="vertex-anthropic",
            to_model="claude-sonnet-4-5@20250929",
            error_kind="overloaded",
        )
    )
    assert out.getvalue() == (
        "anthropic:claude-sonnet-4-5 failed (overloaded): falling back to "
        "vertex-anthropic:claude-sonnet-4-5@20250929\n"
    )

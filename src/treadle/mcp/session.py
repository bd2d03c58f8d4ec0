"""The SDK's client session, advertising only what treadle handles."""

from __future__ import annotations

from typing import Any

from mcp import ClientSession


class Session(ClientSession):
    """A ``ClientSession`` that advertises form elicitation only: treadle's handler answers
    forms (``(message, schema) -> dict``); URL-mode requests are refused, so not claimed."""

    def _build_capabilities(self, version: str) -> Any:
        capabilities = super()._build_capabilities(version)
        elicitation = getattr(capabilities, "elicitation", None)
        if elicitation is not None and getattr(elicitation, "url", None) is not None:
            elicitation.url = None
        return capabilities

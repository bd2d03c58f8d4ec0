"""Shared by the examples: the model named by TREADLE_MODEL, or a labelled offline stand-in."""

from __future__ import annotations

import os
from collections.abc import Sequence

from treadle import Provider
from treadle.testing import ScriptedProvider, ScriptItem


def model_or_script(script: Sequence[ScriptItem]) -> Provider:
    """``get_provider($TREADLE_MODEL)`` when set; otherwise a ScriptedProvider playing
    ``script`` (what a real model would plausibly answer), announced as offline."""
    spec = os.environ.get("TREADLE_MODEL")
    if spec:
        from treadle.providers import get_provider

        return get_provider(spec)
    print("(offline: scripted model answers; set TREADLE_MODEL to use a real one)")
    return ScriptedProvider(script, name="offline", model="offline-script", delay=0.002)

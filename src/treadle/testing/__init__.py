"""Test doubles for applications' own tests: a scripted provider (and wire-level fakes)."""

from .offline import OfflineProvider
from .scripted import ScriptedProvider, ScriptItem

__all__ = ["OfflineProvider", "ScriptItem", "ScriptedProvider"]

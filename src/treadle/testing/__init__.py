"""Test doubles for applications' own tests: a scripted provider (and wire-level fakes)."""

from .scripted import ScriptedProvider, ScriptItem

__all__ = ["ScriptItem", "ScriptedProvider"]

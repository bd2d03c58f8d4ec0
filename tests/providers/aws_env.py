"""An AWS environment of the test's own: no variable, file or metadata endpoint of the
machine's is read (botocore would otherwise find a developer's real credentials)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ACCESS_KEY = "AKIDTREADLETEST01"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYTREADLESECRET"
REGION = "us-east-1"
MODEL = "anthropic.claude-3-5-sonnet-20241022-v2:0"


def isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Clear every ``AWS_*`` variable, point the shared files into ``tmp_path`` (returned)
    and turn the instance metadata lookup off."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return tmp_path


def static_keys(monkeypatch: pytest.MonkeyPatch, token: str | None = None) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    if token:
        monkeypatch.setenv("AWS_SESSION_TOKEN", token)
    monkeypatch.setenv("AWS_REGION", REGION)

"""The clients adapters make share one TLS context: the CA certificates are read once per
process (~50 ms of CPU each time), not once per adapter, and still from where httpx reads
them (``SSL_CERT_FILE``, ``SSL_CERT_DIR``, else certifi's bundle)."""

from __future__ import annotations

import ssl
from typing import Any

import certifi
import pytest

from treadle.providers import Anthropic, Gemini, OpenAIChat


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Where each CA certificate read of this test was from (``load_verify_locations``)."""
    seen: list[Any] = []
    original = ssl.SSLContext.load_verify_locations

    def counting(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        seen.append(next(filter(None, [*args, *kwargs.values()]), None))
        original(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting)
    return seen


def test_many_adapters_read_the_ca_certificates_once(
    reads: list[Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    bundle = tmp_path / "ca.pem"  # a path of this test's own: no context made before it
    bundle.write_bytes(open(certifi.where(), "rb").read())
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    adapters = [
        *(OpenAIChat("m", api_key="k") for _ in range(3)),
        Anthropic("m", api_key="k"),
        Gemini("m", api_key="k"),
    ]
    clients = [adapter.client for adapter in adapters]
    assert len({id(c) for c in clients}) == len(adapters)  # each adapter its own client
    assert reads == [str(bundle)]


def test_a_changed_ssl_cert_file_is_read_for_the_next_client(
    reads: list[Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    first, second = tmp_path / "first.pem", tmp_path / "second.pem"
    for path in (first, second):
        path.write_bytes(open(certifi.where(), "rb").read())
    monkeypatch.setenv("SSL_CERT_FILE", str(first))
    assert OpenAIChat("m", api_key="k").client is not None
    monkeypatch.setenv("SSL_CERT_FILE", str(second))
    assert OpenAIChat("m", api_key="k").client is not None
    assert reads == [str(first), str(second)]
    missing = tmp_path / "missing.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(missing))
    with pytest.raises(FileNotFoundError):  # as httpx itself fails on a missing bundle
        OpenAIChat("m", api_key="k").client  # noqa: B018

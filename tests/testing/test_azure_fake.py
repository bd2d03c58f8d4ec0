"""AzureFake read by the official clients: openai's AzureOpenAI (a key and an Entra token
provider, classic and v1), and azure-identity's ClientSecretCredential getting its tokens
from EntraID's endpoint over HTTPS on 127.0.0.1. So the fake speaks Azure as Azure's own
clients expect, and treadle's adapters are checked against that fake."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from typing import Any

import anyio.to_thread
import pytest

from treadle.providers import AzureOpenAIChat
from treadle.providers.azure import AZURE_SCOPE
from treadle.testing import AzureFake, EntraID, serve
from treadle.testing.azure import DEFAULT_KEY

openai = pytest.importorskip("openai")
pytestmark = pytest.mark.anyio


async def _in_thread(call: Any) -> Any:
    """A blocking client's call, off the event loop that serves the fake."""
    return await anyio.to_thread.run_sync(call)


async def test_azure_openai_reads_the_classic_chat_api_with_a_key() -> None:
    fake = AzureFake.chat(["Hello, SDK.", "Whole answer."], deployments=["prod"])
    async with serve(fake) as url:
        client = openai.AzureOpenAI(
            azure_endpoint=url, api_version="2024-10-21", api_key=DEFAULT_KEY, max_retries=0
        )

        def chat() -> tuple[str, str]:
            stream = client.chat.completions.create(
                model="prod", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            whole = client.chat.completions.create(
                model="prod", messages=[{"role": "user", "content": "hi"}]
            )
            return streamed, whole.choices[0].message.content or ""

        assert await _in_thread(chat) == ("Hello, SDK.", "Whole answer.")
    assert fake.requests[0].path == "/openai/deployments/prod/chat/completions"
    assert fake.requests[0].query == "api-version=2024-10-21"


async def test_azure_openai_with_a_token_provider_reads_the_responses_api() -> None:
    entra = EntraID()
    fake = AzureFake.responses(["Responses, SDK."], deployments=["gpt-5"], entra=entra)
    async with serve(fake) as url:
        client = openai.AzureOpenAI(
            azure_endpoint=url,
            api_version="2025-04-01-preview",
            azure_ad_token_provider=entra.token,
            max_retries=0,
        )
        response = await _in_thread(lambda: client.responses.create(model="gpt-5", input="hi"))
    assert response.output_text == "Responses, SDK."
    assert fake.requests[0].path == "/openai/responses"
    assert fake.requests[0].headers["authorization"].startswith("Bearer ")


async def test_async_azure_openai_streams_with_an_async_token_provider() -> None:
    entra = EntraID()

    async def token() -> str:
        return entra.token(AZURE_SCOPE)

    fake = AzureFake.chat(["Async, SDK."], deployments=["prod"], entra=entra, api_key=None)
    async with serve(fake) as url:
        client = openai.AsyncAzureOpenAI(
            azure_endpoint=url,
            api_version="2024-10-21",
            azure_ad_token_provider=token,
            max_retries=0,
        )
        stream = await client.chat.completions.create(
            model="prod", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        await client.close()
    assert text == "Async, SDK."
    assert (fake.requests[0].path, fake.requests[0].query) == (
        "/openai/deployments/prod/chat/completions",
        "api-version=2024-10-21",
    )
    assert fake.requests[0].headers["authorization"].startswith("Bearer ")


async def test_the_sdk_is_refused_as_azure_refuses_it() -> None:
    fake = AzureFake.chat(["never"], deployments=["prod"])
    async with serve(fake) as url:
        client = openai.AzureOpenAI(
            azure_endpoint=url, api_version="2024-10-21", api_key="wrong", max_retries=0
        )
        with pytest.raises(openai.AuthenticationError):
            await _in_thread(
                lambda: client.chat.completions.create(
                    model="prod", messages=[{"role": "user", "content": "hi"}]
                )
            )
        good = client.with_options(api_key=DEFAULT_KEY)
        with pytest.raises(openai.NotFoundError) as caught:
            await _in_thread(
                lambda: good.chat.completions.create(
                    model="staging", messages=[{"role": "user", "content": "hi"}]
                )
            )
    assert caught.value.code == "DeploymentNotFound"


async def test_the_openai_client_reads_the_v1_api_with_the_key_as_a_bearer() -> None:
    fake = AzureFake.chat(["v1, SDK."])
    async with serve(fake) as url:
        client = openai.OpenAI(base_url=f"{url}/openai/v1/", api_key=DEFAULT_KEY, max_retries=0)
        reply = await _in_thread(
            lambda: client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
            )
        )
    assert reply.choices[0].message.content == "v1, SDK."
    assert fake.requests[0].path == "/openai/v1/chat/completions"


# ---- azure-identity against EntraID's token endpoint


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (azure-identity takes only https)."""
    crypto = pytest.importorskip("cryptography")
    del crypto
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("entra-tls")
    certfile, keyfile = folder / "cert.pem", folder / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(certfile), str(keyfile)


@pytest.fixture(scope="module")
def tenant(certificate: tuple[str, str]) -> Iterator[tuple[EntraID, str]]:
    entra = EntraID(lifetime=120)  # under azure-identity's 5-minute margin: asked each time
    with entra.serve(certfile=certificate[0], keyfile=certificate[1]) as authority:
        yield entra, authority


def _credential(tenant: tuple[EntraID, str], certfile: str, secret: str) -> Any:
    identity = pytest.importorskip("azure.identity")
    entra, authority = tenant
    return identity.ClientSecretCredential(
        entra.tenant,
        "treadle-test-app",
        secret,
        authority=authority,
        disable_instance_discovery=True,
        connection_verify=certfile,  # trust the test's certificate, and only here
    )


async def test_azure_identity_tokens_from_the_local_tenant_reach_the_adapter(
    tenant: tuple[EntraID, str], certificate: tuple[str, str]
) -> None:
    identity = pytest.importorskip("azure.identity")
    entra, _ = tenant
    credential = _credential(tenant, certificate[0], "treadle-test-secret")
    token_provider = identity.get_bearer_token_provider(credential, AZURE_SCOPE)
    fake = AzureFake.chat(["One.", "Two."], entra=entra, api_key=None)
    before = len(entra.issued)
    async with serve(fake) as url:
        provider = AzureOpenAIChat(
            "gpt-4o-mini", azure_endpoint=url, azure_ad_token_provider=token_provider
        )
        for expected in ("One.", "Two."):
            # azure-identity's provider blocks while it fetches: a thread, as the docs advise
            result = await _ask_in(provider)
            assert result == expected
    issued = entra.issued[before:]
    assert [claims["aud"] for claims in issued] == ["https://cognitiveservices.azure.com"] * 2
    assert all(claims["appid"] == "treadle-test-app" for claims in issued)
    sent = [r.headers["authorization"] for r in fake.requests]
    assert sent[0] != sent[1]  # refreshed before expiry, as azure-identity does


async def _ask_in(provider: AzureOpenAIChat) -> str:
    from treadle.providers import ModelRequest
    from treadle.types import UserMessage

    events = [e async for e in provider.stream(ModelRequest(messages=[UserMessage.of("hi")]))]
    return str(events[-1].message.text)  # type: ignore[union-attr]


async def test_a_wrong_client_secret_is_an_auth_error_naming_the_credential(
    tenant: tuple[EntraID, str], certificate: tuple[str, str]
) -> None:
    identity = pytest.importorskip("azure.identity")
    from treadle.providers import ProviderError

    credential = _credential(tenant, certificate[0], "not-the-secret")
    provider_fn = identity.get_bearer_token_provider(credential, AZURE_SCOPE)
    fake = AzureFake.chat(["never"], entra=tenant[0])
    provider = AzureOpenAIChat(
        "gpt-4o-mini",
        azure_endpoint="https://res.openai.azure.com",
        azure_ad_token_provider=provider_fn,
        client=fake.client(),
    )
    with pytest.raises(ProviderError) as caught:
        await _ask_in(provider)
    assert caught.value.kind == "auth"
    assert "ClientAuthenticationError" in caught.value.message
    assert fake.requests == []  # no token: nothing was sent
    assert "not-the-secret" not in str(caught.value)


def test_the_token_endpoint_refuses_http_authorities_in_azure_identity() -> None:
    """Why the tenant serves HTTPS: azure-identity takes no other authority."""
    identity = pytest.importorskip("azure.identity")
    with pytest.raises(ValueError, match="https"):
        identity.ClientSecretCredential("t", "c", "s", authority="http://127.0.0.1:1")

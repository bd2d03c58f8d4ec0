"""Bedrock's credentials against a local server that checks each request the way AWS does
(SigV4 recomputed with botocore from the request and a known secret; Bedrock API keys),
driven through model strings and environment variables as docs/cloud.md says."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio.from_thread
import httpx
import pytest
from tests.providers.aws_env import ACCESS_KEY, MODEL, REGION, SECRET_KEY, isolate, static_keys

from treadle import AgentContext, AgentLoopConfig, UserMessage, agent_loop
from treadle.errors import ConfigurationError
from treadle.loop import RetryPolicy
from treadle.providers import Bedrock, ModelRequest, ProviderError, StreamDone, get_provider
from treadle.testing import Fail, RecordedRequest, SigV4Check, WireFake, serve
from treadle.testing.exchange import Reply

pytest.importorskip("botocore")
pytestmark = pytest.mark.anyio

API_KEY = "bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29tLz9BY3Rpb249Q2FsbFdpdGhCZWFyZXJUb2tlbg=="
TEMP_KEY, TEMP_SECRET = "ASIATREADLETEMP01", "temporary/SECRET+treadle0123456789abcdef"
TOKEN = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQDtreadle-session-token"
PROMPT = ModelRequest(messages=[UserMessage.of("Hello?")])


def answer(request: RecordedRequest) -> str:
    return "Hello from Bedrock."


class Server:
    """The checking server (in a thread of its own, shared by the module's tests)."""

    def __init__(self, url: str, checker: SigV4Check, fake: Any) -> None:
        self.url, self.checker, self.fake = url, checker, fake

    def last_accepted(self) -> RecordedRequest:
        return self.checker.accepted[-1]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    fake = WireFake.bedrock(default=answer)
    checker = SigV4Check(
        fake,
        credentials={ACCESS_KEY: SECRET_KEY, TEMP_KEY: (TEMP_SECRET, TOKEN)},
        api_keys=[API_KEY],
        region=REGION,
    )
    with anyio.from_thread.start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(serve(checker)) as url:
            yield Server(url, checker, fake)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """A client without a certificate store to load (the server is plain HTTP): each owned
    client would load one, a quarter of a second."""
    async with httpx.AsyncClient(verify=False) as client:
        yield client


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: Server) -> Path:
    """An isolated AWS environment whose Bedrock endpoint is the local server."""
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url)
    return tmp_path


async def text_of(provider: Any) -> str:
    events = [event async for event in provider.stream(PROMPT)]
    assert isinstance(events[-1], StreamDone)
    return str(events[-1].message.text)


async def failure(provider: Any) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await text_of(provider)
    return caught.value


async def test_keys_from_the_environment_sign_each_request(
    aws: Path, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, server: Server
) -> None:
    static_keys(monkeypatch)
    provider = get_provider(
        f"bedrock:{MODEL}", client=http
    )  # the endpoint and keys: the environment's
    assert await text_of(provider) == "Hello from Bedrock."
    assert await text_of(provider) == "Hello from Bedrock."
    first, second = server.checker.accepted[-2:]
    scope = f"Credential={ACCESS_KEY}/"
    assert (
        scope in first.headers["authorization"]
        and f"/{REGION}/bedrock/aws4_request" in (first.headers["authorization"])
    )
    assert first.path == f"/model/{MODEL}/converse-stream"  # the ':' travelled as %3A
    assert "%3A0" in first.url
    assert SECRET_KEY not in repr(provider) and SECRET_KEY not in str(first.headers)
    assert second.headers["x-amz-date"] >= first.headers["x-amz-date"]  # signed anew


@pytest.mark.one_backend  # what is signed and checked: the backend cannot matter
async def test_a_session_token_is_sent_and_checked(
    aws: Path, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, server: Server
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", TEMP_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", TEMP_SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)  # the second region variable
    assert await text_of(get_provider(f"bedrock:{MODEL}", client=http)) == "Hello from Bedrock."
    assert server.last_accepted().headers["x-amz-security-token"] == TOKEN

    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN + "-stale")
    error = await failure(get_provider(f"bedrock:{MODEL}", client=http))
    assert (error.kind, error.status_code) == ("auth", 403)
    assert "UnrecognizedClientException" in error.message and TOKEN not in str(error)


async def test_a_wrong_secret_is_refused_as_aws_refuses_it(
    aws: Path, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, server: Server
) -> None:
    static_keys(monkeypatch)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-the-server-knows-0123")
    rejected = len(server.checker.rejected)
    config = AgentLoopConfig(
        provider=get_provider(f"bedrock:{MODEL}", client=http), retry=RetryPolicy()
    )
    new = await agent_loop("hi", AgentContext(), config)
    error = new[-1].error  # type: ignore[union-attr]
    assert error is not None and (error.kind, error.status_code) == ("auth", 403)
    assert "signature we calculated does not match" in error.message
    assert "not-the-secret" not in error.message
    assert len(server.checker.rejected) == rejected + 1  # an auth error is not retried
    assert server.checker.rejected[-1][1] == "InvalidSignatureException"


@pytest.mark.one_backend  # what is signed and checked: the backend cannot matter
async def test_a_signature_dated_too_long_ago_is_expired(
    aws: Path, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, server: Server
) -> None:
    static_keys(monkeypatch)
    server.checker.clock = lambda: datetime.now(timezone.utc) + timedelta(minutes=20)
    try:
        error = await failure(get_provider(f"bedrock:{MODEL}", client=http))
    finally:
        server.checker.clock = lambda: datetime.now(timezone.utc)
    assert (error.kind, error.status_code) == ("auth", 403)
    assert "Signature expired" in error.message and "is now earlier than" in error.message


@pytest.mark.one_backend  # what is signed and checked: the backend cannot matter
async def test_a_shared_profile_gives_the_keys_and_the_region(
    aws: Path, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, server: Server
) -> None:
    (aws / "credentials").write_text(
        f"[dev]\naws_access_key_id = {TEMP_KEY}\naws_secret_access_key = {TEMP_SECRET}\n"
        f"aws_session_token = {TOKEN}\n"
    )
    (aws / "config").write_text(f"[profile dev]\nregion = {REGION}\n")
    monkeypatch.setenv("AWS_PROFILE", "dev")
    provider = get_provider(f"bedrock:{MODEL}", client=http)  # no AWS_REGION: the profile's region
    assert isinstance(provider, Bedrock) and provider.region == REGION
    assert await text_of(provider) == "Hello from Bedrock."
    monkeypatch.delenv("AWS_PROFILE")
    named = Bedrock(MODEL, profile="dev", client=http)  # the same profile, named in code
    assert await text_of(named) == "Hello from Bedrock."
    assert f"Credential={TEMP_KEY}/" in server.last_accepted().headers["authorization"]


class ContainerRole:
    """A container credentials endpoint (ECS, EKS Pod Identity): each call hands out a new
    key pair that expires in five minutes, so botocore refreshes it before each request."""

    def __init__(self, checker: SigV4Check) -> None:
        self.checker = checker
        self.calls = 0
        self.authorization: list[str] = []

    async def respond(self, request: RecordedRequest) -> Reply:
        self.calls += 1
        self.authorization.append(request.headers.get("authorization", ""))
        key, secret, token = (
            f"ASIAROLE{self.calls:09d}",
            f"role-secret-{self.calls}",
            f"tok-{self.calls}",
        )
        self.checker.credentials[key] = (secret, token)
        expires = datetime.now(timezone.utc) + timedelta(minutes=5)
        body = {"AccessKeyId": key, "SecretAccessKey": secret, "Token": token,
                "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}  # fmt: skip
        return Reply(200, [("content-type", "application/json")], [json.dumps(body).encode()])


async def test_a_container_role_is_refreshed_by_botocore_and_each_request_signed_anew(
    aws: Path, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, server: Server
) -> None:
    role = ContainerRole(server.checker)
    async with serve(role) as credentials_url:
        monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", credentials_url + "/creds")
        monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "pod-identity-token")
        monkeypatch.setenv("AWS_REGION", REGION)
        provider = get_provider(f"bedrock:{MODEL}", client=http)
        assert role.calls == 0  # nothing looked up before the first request
        assert await text_of(provider) == "Hello from Bedrock."
        assert await text_of(provider) == "Hello from Bedrock."
    used = [r.headers["authorization"] for r in server.checker.accepted[-2:]]
    assert role.calls >= 2 and role.authorization[0] == "pod-identity-token"
    assert "Credential=ASIAROLE" in used[0] and used[0].split("/")[0] != used[1].split("/")[0]


async def test_a_bedrock_api_key_needs_no_botocore(
    aws: Path, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, server: Server
) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", API_KEY)
    monkeypatch.setenv("AWS_REGION", REGION)
    static_keys(monkeypatch)  # the API key wins, as in boto3
    for name in ("botocore", "botocore.session", "botocore.auth"):
        monkeypatch.setitem(sys.modules, name, None)  # importing it now fails
    provider = get_provider(f"bedrock:{MODEL}", client=http)
    assert await text_of(provider) == "Hello from Bedrock."
    assert server.last_accepted().headers["authorization"] == f"Bearer {API_KEY}"
    assert API_KEY not in repr(provider)

    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK")
    with pytest.raises(ConfigurationError, match=r"treadle\[bedrock\].*AWS_BEARER_TOKEN_BEDROCK"):
        get_provider(f"bedrock:{MODEL}", client=http)


@pytest.mark.one_backend  # what is signed and checked: the backend cannot matter
async def test_a_wrong_api_key_is_refused_and_never_shown(
    aws: Path, http: httpx.AsyncClient, server: Server
) -> None:
    wrong = "bedrock-api-key-WRONGWRONGWRONG0123456789"
    error = await failure(Bedrock(MODEL, api_key=wrong, region=REGION, client=http))
    assert (error.kind, error.status_code) == ("auth", 403) and wrong not in str(error)
    server.fake.add(Fail(400, message=f"the key {API_KEY} is echoed back"))
    echoed = await failure(Bedrock(MODEL, api_key=API_KEY, region=REGION, client=http))
    assert "echoed back" in echoed.message and API_KEY not in echoed.message


@pytest.mark.one_backend  # what is signed and checked: the backend cannot matter
async def test_no_credentials_anywhere_is_an_auth_error_naming_the_ways(
    aws: Path, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_REGION", REGION)
    provider = get_provider(f"bedrock:{MODEL}", client=http)
    error = await failure(provider)
    assert error.kind == "auth" and "AWS_ACCESS_KEY_ID" in error.message
    assert "AWS_BEARER_TOKEN_BEDROCK" in error.message


@pytest.mark.one_backend  # what is signed and checked: the backend cannot matter
async def test_an_inference_profile_arn_is_signed_as_sent(
    aws: Path, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, server: Server
) -> None:
    static_keys(monkeypatch)
    profile = "us.anthropic.claude-3-7-sonnet-20250219-v1:0"
    arn = f"arn:aws:bedrock:us-east-1:123456789012:inference-profile/{profile}"
    assert await text_of(get_provider(f"bedrock:{arn}", client=http)) == "Hello from Bedrock."
    sent = server.last_accepted()
    assert "inference-profile%2Fus.anthropic" in sent.url
    assert server.fake.format.model_of(sent.path, None) == arn


def test_region_and_endpoint_come_from_the_environment_as_boto3_reads_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", API_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    assert Bedrock(MODEL).base_url == "https://bedrock-runtime.eu-west-3.amazonaws.com"
    monkeypatch.setenv("AWS_REGION", "ap-south-1")  # AWS_REGION first
    assert Bedrock(MODEL).base_url == "https://bedrock-runtime.ap-south-1.amazonaws.com"
    assert Bedrock(MODEL, region="cn-north-1").base_url.endswith(".amazonaws.com.cn")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9/all")
    assert Bedrock(MODEL).base_url == "http://127.0.0.1:9/all"
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "http://127.0.0.1:9/bedrock")
    assert Bedrock(MODEL).base_url == "http://127.0.0.1:9/bedrock"  # the service's own first
    at = get_provider(f"bedrock:{MODEL}@http://127.0.0.1:9/given")
    assert isinstance(at, Bedrock) and at.base_url == "http://127.0.0.1:9/given"
    with pytest.raises(ConfigurationError, match="only over HTTPS"):  # as botocore: TLS only
        Bedrock(MODEL, base_url="http://bedrock.internal.example")
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert Bedrock(MODEL).base_url == "https://bedrock-runtime.ap-south-1.amazonaws.com"
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name)
    with pytest.raises(ConfigurationError, match="AWS_REGION"):
        Bedrock(MODEL)

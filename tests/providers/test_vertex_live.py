"""Vertex AI over real sockets, with Google's token checks: a local OAuth token endpoint
verifies the RS256-signed JWT of a service account (google-auth's own credentials, their
``token_uri`` pointed at it) and issues tokens that expire; the Vertex wire fake accepts only
live ones. Credentials come the ways Application Default Credentials find them; tokens are
refreshed in a worker thread before they expire (docs/cloud.md#vertex-ai)."""

from __future__ import annotations

import json
import os
import ssl
import sys
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from anyio.from_thread import start_blocking_portal

from treadle import Agent, AgentContext, AgentLoopConfig, agent_loop, tool
from treadle.providers import GoogleAuth, ModelRequest, ProviderError, VertexGemini, get_provider
from treadle.testing import Fail, GoogleOAuthFake, RecordedRequest, WireFake, serve
from treadle.testing.exchange import Reply
from treadle.types import AssistantMessage, ToolCall, UserMessage

pytest.importorskip("google.auth")
import google.oauth2.credentials
from google.auth.credentials import Credentials
from google.oauth2 import service_account

pytestmark = pytest.mark.anyio
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
_TLS = ssl.create_default_context()  # made once: httpx makes one per client otherwise (~0.3 s)


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(verify=_TLS)


class Switch:
    """One server for the module; each test puts its own answerer behind it."""

    def __init__(self, answerer: Any) -> None:
        self.answerer = answerer

    async def respond(self, request: RecordedRequest) -> Reply:
        reply: Reply = await self.answerer.respond(request)
        return reply


class Servers:
    def __init__(self, oauth: GoogleOAuthFake, tokens: str, api: Switch, url: str) -> None:
        self.oauth, self.token_uri, self.api, self.url = oauth, tokens + "/token", api, url

    def fake(self, fake: WireFake) -> WireFake:
        fake.gate = self.oauth.check
        self.api.answerer = fake
        return fake

    def credentials(self) -> Any:
        info = self.oauth.service_account_info(self.token_uri)
        return service_account.Credentials.from_service_account_info(info, scopes=SCOPES)


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    oauth = GoogleOAuthFake()
    api = Switch(WireFake.vertex())
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(serve(oauth)) as tokens,
        portal.wrap_async_context_manager(serve(api)) as url,
    ):
        yield Servers(oauth, tokens, api, url)


@pytest.fixture(autouse=True)
def fresh_state(servers: Servers, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in (
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_VERTEX_BASE_URL",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "ANTHROPIC_VERTEX_PROJECT_ID",
        "CLOUD_ML_REGION",
    ):
        monkeypatch.delenv(name, raising=False)
    servers.oauth.lifetime_s = 3600
    yield
    servers.oauth.lifetime_s = 3600


def ask(text: str = "hi") -> ModelRequest:
    return ModelRequest(messages=[UserMessage.of(text)])


async def answer(model: Any, request: ModelRequest | None = None) -> AssistantMessage:
    events = [e async for e in model.stream(request or ask())]
    message: AssistantMessage = events[-1].message
    return message


def bearer(request: RecordedRequest) -> str:
    return request.headers["authorization"].removeprefix("Bearer ")


async def test_a_service_account_key_file_found_by_adc_signs_in_and_names_the_project(
    servers: Servers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = tmp_path / "key.json"
    key.write_text(json.dumps(servers.oauth.service_account_info(servers.token_uri)))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    fake = servers.fake(WireFake.vertex(["Hello from Vertex."]))
    issued = len(servers.oauth.issued)

    model = get_provider(f"vertex:gemini-2.5-flash@{servers.url}", client=client())
    message = await answer(model)

    assert message.text == "Hello from Vertex." and message.provider == "vertex"
    (sent,) = fake.requests
    assert sent.path == (
        "/v1/projects/wirefake-project/locations/europe-west4/publishers/google/models/"
        "gemini-2.5-flash:streamGenerateContent"
    )
    assert sent.query == "alt=sse"
    assert len(servers.oauth.issued) == issued + 1
    assert servers.oauth.issued[-1].grant == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    assert bearer(sent) == servers.oauth.issued[-1].token


async def test_gcloud_user_credentials_refresh_and_name_their_quota_project(
    servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What `gcloud auth application-default login` writes; google-auth sends a user's refresh
    # to Google's own endpoint whatever the file says, so the credentials are built here.
    info = servers.oauth.authorized_user_info(servers.token_uri, quota_project="billing-project")
    user = google.oauth2.credentials.Credentials(
        None,
        refresh_token=info["refresh_token"],
        token_uri=info["token_uri"],
        client_id=info["client_id"],
        client_secret=info["client_secret"],
        quota_project_id=info["quota_project_id"],
    )
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "user-project")
    fake = servers.fake(WireFake.vertex(["Hi, user."]))

    model = VertexGemini(
        "gemini-2.5-flash",
        client=client(),
        base_url=servers.url,
        location="us-central1",
        credentials=user,
    )
    assert (await answer(model)).text == "Hi, user."

    (sent,) = fake.requests
    assert "/projects/user-project/locations/us-central1/" in sent.path
    assert sent.headers["x-goog-user-project"] == "billing-project"
    assert servers.oauth.issued[-1].grant == "refresh_token"
    assert bearer(sent) == servers.oauth.issued[-1].token


async def test_a_token_is_reused_while_fresh_and_refreshed_before_it_expires(
    servers: Servers,
) -> None:
    fake = servers.fake(WireFake.vertex(["one", "two", "three", "four"]))
    start = len(servers.oauth.issued)
    model = VertexGemini(
        "gemini-2.5-flash",
        client=client(),
        project="p",
        base_url=servers.url,
        credentials=servers.credentials(),
    )
    await answer(model)
    await answer(model)
    assert len(servers.oauth.issued) == start + 1  # an hour left: the same token twice
    assert bearer(fake.requests[0]) == bearer(fake.requests[1])

    # Tokens living two minutes, less than the five-minute margin: each is replaced before
    # the next request, while it is still live at the server.
    servers.oauth.lifetime_s = 120
    short = VertexGemini(
        "gemini-2.5-flash",
        client=client(),
        project="p",
        base_url=servers.url,
        credentials=servers.credentials(),
    )
    await answer(short)
    first = bearer(fake.requests[2])
    await answer(short)
    second = bearer(fake.requests[3])
    assert second != first
    assert servers.oauth.live(first)  # replaced before it expired, not after
    assert len(servers.oauth.issued) == start + 3
    assert [r.headers.get("authorization") for r in fake.requests[2:]] == [
        f"Bearer {first}",
        f"Bearer {second}",
    ]
    fake.assert_done()  # every request was answered: no token was refused


async def test_a_revoked_token_is_refreshed_once_and_the_request_sent_again(
    servers: Servers,
) -> None:
    fake = servers.fake(WireFake.vertex(["before", "after"]))
    model = VertexGemini(
        "gemini-2.5-flash",
        client=client(),
        project="p",
        base_url=servers.url,
        credentials=servers.credentials(),
    )
    await answer(model)
    old = bearer(fake.requests[0])
    servers.oauth.revoke(old)

    assert (await answer(model)).text == "after"
    assert bearer(fake.requests[1]) == old  # refused with 401 ...
    assert bearer(fake.requests[2]) != old  # ... then sent again with a new token
    fake.assert_done()


async def test_a_token_the_api_refuses_is_an_auth_error_that_names_no_token(
    servers: Servers,
) -> None:
    fake = servers.fake(WireFake.vertex(["never"]))
    model = VertexGemini(
        "gemini-2.5-flash",
        project="p",
        base_url=servers.url,
        auth=lambda: "ya29.not-issued-by-google",
    )
    with pytest.raises(ProviderError) as caught:
        await answer(model)
    assert caught.value.kind == "auth" and caught.value.status_code == 401
    assert "UNAUTHENTICATED" in str(caught.value) or "invalid authentication" in str(caught.value)
    assert "ya29" not in str(caught.value) and fake.remaining == 1


@pytest.fixture(scope="module")
def stranger(servers: Servers) -> GoogleOAuthFake:
    """Another key under the same account name: Google does not know it."""
    return GoogleOAuthFake(client_email=servers.oauth.client_email)


async def test_a_key_the_token_endpoint_does_not_know_is_refused_there(
    servers: Servers, stranger: GoogleOAuthFake
) -> None:
    info = stranger.service_account_info(servers.token_uri)
    credentials = service_account.Credentials.from_service_account_info(info, scopes=SCOPES)
    fake = servers.fake(WireFake.vertex(["never"]))
    model = VertexGemini(
        "gemini-2.5-flash",
        client=client(),
        project="p",
        base_url=servers.url,
        credentials=credentials,
    )
    result = await Agent(model).run("hi")
    assert result.error is not None and result.error.kind == "auth"  # not retried
    assert "Invalid JWT Signature" in result.error.message
    assert servers.oauth.refused[-1] == "Invalid JWT Signature."
    assert fake.requests == []


async def test_the_refresh_runs_in_a_worker_thread_once_for_concurrent_requests(
    servers: Servers,
) -> None:
    """google-auth blocks while it refreshes: never on the event loop, and requests that
    find the token stale together refresh it once."""

    class Counted(Credentials):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.threads: list[int] = []

        def refresh(self, request: Any) -> None:
            self.threads.append(threading.get_ident())
            issued = servers.oauth.issue()
            self.token = issued.token
            self.expiry = datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(hours=1)

    credentials = Counted()
    fake = servers.fake(WireFake.vertex(default="ok"))
    model = VertexGemini(
        "gemini-2.5-flash",
        client=client(),
        project="p",
        base_url=servers.url,
        credentials=credentials,
    )
    loop_thread = threading.get_ident()
    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(answer, model)
    assert len(credentials.threads) == 1 and credentials.threads[0] != loop_thread
    assert len(fake.requests) == 5 and len({bearer(r) for r in fake.requests}) == 1


CHILD = """
import sys, anyio
from treadle.providers import ModelRequest, VertexGemini
from treadle.types import UserMessage

async def main():
    model = VertexGemini("gemini-2.5-flash", base_url=sys.argv[1], location="us-central1")
    events = [e async for e in model.stream(ModelRequest(messages=[UserMessage.of("hi")]))]
    print(events[-1].message.text, model.project)

anyio.run(main)
"""


@pytest.mark.slow  # a process of its own: google-auth reads the metadata host at import
@pytest.mark.one_backend
async def test_on_google_cloud_adc_takes_the_metadata_servers_token_and_project(
    servers: Servers, tmp_path: Path
) -> None:
    """GKE workload identity, Cloud Run and Compute Engine: no key file, no gcloud; Google
    Cloud's metadata server gives the token and the project."""
    fake = servers.fake(WireFake.vertex(["From the cluster."]))
    host = servers.token_uri.removeprefix("http://").removesuffix("/token")
    env = {**os.environ, "GCE_METADATA_HOST": host, "GCE_METADATA_IP": host}
    env["CLOUDSDK_CONFIG"] = str(tmp_path)  # no gcloud credentials either
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT"):
        env.pop(name, None)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    done = await anyio.run_process([sys.executable, str(script), servers.url], env=env, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == ["From", "the", "cluster.", "wirefake-project"]
    (sent,) = fake.requests
    assert "/projects/wirefake-project/locations/us-central1/" in sent.path
    assert servers.oauth.issued[-1].grant == "metadata"
    assert bearer(sent) == servers.oauth.issued[-1].token


@tool
def weather(city: str) -> str:
    """Today's weather."""
    return f"Rain in {city}"


async def test_claude_on_vertex_runs_a_tool_turn_through_the_loop(servers: Servers) -> None:
    call = AssistantMessage(
        content=[ToolCall(id="toolu_01", name="weather", arguments={"city": "Oslo"})],
        stop_reason="tool_use",
    )
    fake = servers.fake(WireFake.vertex_anthropic([call, "It rains in Oslo."]))
    model = get_provider(
        f"vertex:claude-sonnet-4-5@20250929@{servers.url}/v1",
        credentials=servers.credentials(),
        location="us-east5",
        client=client(),
    )
    result = await Agent(model, tools=[weather]).run("Weather in Oslo?")

    assert result.text == "It rains in Oslo."
    first, second = fake.requests
    assert first.path == (
        "/v1/projects/wirefake-project/locations/us-east5/publishers/anthropic/models/"
        "claude-sonnet-4-5@20250929:streamRawPredict"
    )
    assert first.json["anthropic_version"] == "vertex-2023-10-16" and "model" not in first.json
    assert "anthropic-version" not in first.headers and "x-api-key" not in first.headers
    results = second.json["messages"][-1]["content"]
    assert results[0]["type"] == "tool_result" and results[0]["tool_use_id"] == "toolu_01"
    assert result.messages[1].provider == "vertex-anthropic"


async def test_vertex_quota_errors_are_rate_limits_retried_by_the_loop(servers: Servers) -> None:
    fake = servers.fake(WireFake.vertex([Fail(429, retry_after=0.01), "After the wait."]))
    model = VertexGemini(
        "gemini-2.5-flash",
        client=client(),
        project="p",
        base_url=servers.url,
        credentials=servers.credentials(),
    )
    events = []
    send, receive = anyio.create_memory_object_stream[Any](100)
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            async with send:
                await agent_loop("hi", AgentContext(), AgentLoopConfig(provider=model), send)

        tg.start_soon(run)
        async with receive:
            events = [e async for e in receive]
    retries = [e for e in events if e.type == "provider_retry"]
    assert [(r.error_kind, r.status_code) for r in retries] == [("rate_limit", 429)]
    assert events[-1].messages[-1].text == "After the wait."
    assert len(fake.requests) == 2


async def test_google_auth_is_a_token_provider_for_any_adapter(servers: Servers) -> None:
    """Vertex's OpenAI-compatible endpoint, say: GoogleAuth on auth= of OpenAIChat."""
    auth = GoogleAuth(servers.credentials())
    token = await auth.token()
    assert servers.oauth.live(token)
    assert await auth.token() == token  # fresh: no second refresh
    assert await auth.project() == "wirefake-project"
    assert token not in repr(auth) and auth.secrets == (token,)

"""The Vertex wire fakes and the Google token endpoint, read by the official SDKs: google-genai
with ``vertexai=True`` and anthropic's ``AnthropicVertex`` sign in through google-auth at
``GoogleOAuthFake`` and talk to the fakes, which accept only the live tokens it issued. And
the token endpoint refuses what Google refuses: a bad signature, a stranger, an assertion
that is expired or lives more than an hour."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal

from treadle.testing import GoogleOAuthFake, RecordedRequest, WireFake, serve
from treadle.testing.exchange import Reply
from treadle.types import AssistantMessage, ToolCall

pytest.importorskip("google.auth")
import google.auth.crypt
import google.auth.jwt
import httpx
from google.oauth2 import service_account

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


class Switch:
    def __init__(self) -> None:
        self.answerer: Any = WireFake.vertex()

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
    api = Switch()
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(serve(oauth)) as tokens,
        portal.wrap_async_context_manager(serve(api)) as url,
    ):
        yield Servers(oauth, tokens, api, url)


@pytest.mark.slow  # importing google-genai takes seconds on a shared machine
def test_google_genai_on_vertex_reads_the_gemini_fake(servers: Servers) -> None:
    genai = pytest.importorskip("google.genai")
    from google.genai import types

    call = AssistantMessage(
        content=[ToolCall(id="c1", name="weather", arguments={"city": "Oslo"})],
        stop_reason="tool_use",
    )
    fake = servers.fake(WireFake.vertex(["Hello from the fake.", "Streamed too.", call]))
    client = genai.Client(
        vertexai=True,
        project="my-project",
        location="us-central1",
        credentials=servers.credentials(),
        http_options=types.HttpOptions(base_url=servers.url, api_version="v1"),
    )
    assert client.models.generate_content(model="gemini-2.5-flash", contents="hi").text == (
        "Hello from the fake."
    )
    chunks = client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi")
    assert "".join(chunk.text or "" for chunk in chunks) == "Streamed too."
    answer = client.models.generate_content(model="gemini-2.5-flash", contents="weather?")
    (function_call,) = answer.function_calls or []
    assert (function_call.name, function_call.args) == ("weather", {"city": "Oslo"})

    paths = [r.path for r in fake.requests]
    base = "/v1/projects/my-project/locations/us-central1/publishers/google/models/gemini-2.5-flash"
    assert paths == [
        f"{base}:generateContent",
        f"{base}:streamGenerateContent",
        f"{base}:generateContent",
    ]
    tokens = {r.headers["authorization"] for r in fake.requests}
    assert len(tokens) == 1 and servers.oauth.live(tokens.pop().removeprefix("Bearer "))


@pytest.mark.slow  # importing anthropic takes about ten seconds on a shared machine
@pytest.mark.xdist_group("anthropic-sdk")  # on the worker of the other tests importing it
def test_anthropic_vertex_reads_the_claude_fake(servers: Servers) -> None:
    anthropic = pytest.importorskip("anthropic")
    fake = servers.fake(WireFake.vertex_anthropic(["Hello from Claude.", "Streamed."]))
    client = anthropic.AnthropicVertex(
        region="us-east5",
        project_id="my-project",
        credentials=servers.credentials(),
        base_url=servers.url + "/v1",
    )
    model = "claude-sonnet-4-5@20250929"
    message = client.messages.create(
        model=model, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    assert message.content[0].text == "Hello from Claude." and message.model == model
    with client.messages.stream(
        model=model, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        assert stream.get_final_text() == "Streamed."
    base = f"/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/{model}"
    assert [r.path for r in fake.requests] == [f"{base}:rawPredict", f"{base}:streamRawPredict"]
    assert all("model" not in r.json and r.json["anthropic_version"] for r in fake.requests)


def test_the_claude_fake_refuses_a_body_vertex_refuses(servers: Servers) -> None:
    fake = servers.fake(WireFake.vertex_anthropic(["never"]))
    token = servers.oauth.issue().token
    place = "/v1/projects/p/locations/global/publishers/anthropic/models/claude-x"
    url = f"{servers.url}{place}:rawPredict"
    headers = {"authorization": f"Bearer {token}"}
    body = {"messages": [], "max_tokens": 5}
    with_model = httpx.post(url, json={**body, "model": "claude-x"}, headers=headers)
    without_version = httpx.post(url, json=body, headers=headers)
    assert with_model.status_code == 400 and "model" in with_model.text
    assert without_version.status_code == 400 and "anthropic_version" in without_version.text
    assert fake.remaining == 1


def test_the_vertex_fake_answers_401_to_a_token_that_is_not_live(servers: Servers) -> None:
    fake = servers.fake(WireFake.vertex(["never"]))
    url = f"{servers.url}/v1/projects/p/locations/global/publishers/google/models/m:generateContent"
    token = servers.oauth.issue().token
    servers.oauth.revoke(token)
    for headers in (
        {},
        {"authorization": "Bearer ya29.made-up"},
        {"authorization": f"Bearer {token}"},
    ):
        answer = httpx.post(url, json={"contents": []}, headers=headers)
        assert answer.status_code == 401
        assert answer.json()["error"]["status"] == "UNAUTHENTICATED"
    assert fake.remaining == 1


def _grant(servers: Servers, assertion: str) -> httpx.Response:
    return httpx.post(servers.token_uri, data={"grant_type": JWT_BEARER, "assertion": assertion})


def _assertion(servers: Servers, info: dict[str, str] | None = None, **claims: Any) -> str:
    info = info or servers.oauth.service_account_info(servers.token_uri)
    signer = google.auth.crypt.RSASigner.from_service_account_info(info)
    now = int(time.time())
    payload = {
        "iss": info["client_email"],
        "aud": "https://oauth2.googleapis.com/token",
        "scope": SCOPES[0],
        "iat": now,
        "exp": now + 3600,
        **claims,
    }
    return google.auth.jwt.encode(signer, payload).decode()


def test_the_token_endpoint_issues_a_token_for_a_signed_assertion(servers: Servers) -> None:
    answer = _grant(servers, _assertion(servers))
    assert answer.status_code == 200
    body = answer.json()
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600
    assert servers.oauth.live(body["access_token"])


@pytest.mark.parametrize(
    ("claims", "says"),
    [
        ({"iss": "someone@else.iam.gserviceaccount.com"}, "account not found"),
        ({"aud": "https://example.com/token"}, "bad audience"),
        ({"iat": int(time.time()) - 7200, "exp": int(time.time()) - 3600}, "short-lived"),
        ({"exp": int(time.time()) + 7200}, "short-lived"),
        ({"scope": ""}, "Invalid OAuth scope"),
    ],
)
def test_the_token_endpoint_refuses_what_google_refuses(
    servers: Servers, claims: dict[str, Any], says: str
) -> None:
    answer = _grant(servers, _assertion(servers, **claims))
    assert answer.status_code == 400 and says in answer.json()["error_description"]


def test_the_token_endpoint_refuses_a_forged_signature(servers: Servers) -> None:
    head, payload, signature = _assertion(servers).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["exp"] += 60  # changed after signing
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    answer = _grant(servers, f"{head}.{forged}.{signature}")
    assert answer.status_code == 400
    assert answer.json() == {
        "error": "invalid_grant",
        "error_description": "Invalid JWT Signature.",
    }

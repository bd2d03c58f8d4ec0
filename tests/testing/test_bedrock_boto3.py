"""boto3's own ``bedrock-runtime`` client against treadle's Bedrock fake behind the SigV4
checks: what the fake sends is what AWS's SDK parses (Converse, ConverseStream, errors,
exceptions mid-stream), the server accepts boto3's signatures and refuses a wrong one, and
the bodies treadle's adapter builds validate against botocore's model of the API."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import anyio.from_thread
import httpx
import pytest
from tests.providers.aws_env import ACCESS_KEY, MODEL, REGION, SECRET_KEY

from treadle.providers import AWSSigV4, Bedrock, ModelRequest
from treadle.testing import Fail, SigV4Check, StreamError, WireFake, serve
from treadle.types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError, EventStreamError  # noqa: E402
from botocore.validate import ParamValidator  # noqa: E402

API_KEY = "bedrock-api-key-Ym90bzMtcmVhZHMtdGhpcw=="
CALL = ToolCall(id="tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", name="weather", arguments={"city": "Paris"})
RICH = AssistantMessage(
    content=[
        ThinkingContent(thinking="The user wants the weather.", signature="EqQBCkYIsig=="),
        TextContent(text="Let me look that up."),
        CALL,
    ],
    usage=Usage(input=100, output=45, cache_read=20, cache_write=7, total_tokens=172),
)


class Server:
    def __init__(self, url: str, checker: SigV4Check, fake: Any) -> None:
        self.url, self.checker, self.fake = url, checker, fake


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    fake = WireFake.bedrock(default="Hello from the fake.")
    checker = SigV4Check(fake, credentials={ACCESS_KEY: SECRET_KEY}, api_keys=[API_KEY])
    with anyio.from_thread.start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(serve(checker)) as url:
            yield Server(url, checker, fake)


def client(server: Server, secret: str = SECRET_KEY, **options: Any) -> Any:
    return boto3.client(
        "bedrock-runtime",
        region_name=REGION,
        endpoint_url=server.url,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=secret,
        config=Config(retries={"total_max_attempts": 1}),
        **options,
    )


@pytest.fixture(scope="module")
def bedrock(server: Server) -> Any:
    return client(server)


MESSAGES = [{"role": "user", "content": [{"text": "Weather in Paris?"}]}]


def test_boto3_reads_a_converse_response(server: Server, bedrock: Any) -> None:
    server.fake.add(RICH)
    response = bedrock.converse(modelId=MODEL, messages=MESSAGES)
    content = response["output"]["message"]["content"]
    assert content[0] == {
        "reasoningContent": {
            "reasoningText": {"text": "The user wants the weather.", "signature": "EqQBCkYIsig=="}
        }
    }
    assert content[1] == {"text": "Let me look that up."}
    assert content[2] == {
        "toolUse": {"toolUseId": CALL.id, "name": "weather", "input": {"city": "Paris"}}
    }
    assert response["stopReason"] == "tool_use"
    usage = response["usage"]
    assert (usage["inputTokens"], usage["outputTokens"], usage["totalTokens"]) == (100, 45, 172)
    assert (usage["cacheReadInputTokens"], usage["cacheWriteInputTokens"]) == (20, 7)
    assert server.fake.requests[-1].path == f"/model/{MODEL}/converse"


def test_boto3_reads_a_converse_stream(server: Server, bedrock: Any) -> None:
    server.fake.add(RICH)
    response = bedrock.converse_stream(modelId=MODEL, messages=MESSAGES)
    events = list(response["stream"])
    names = [next(iter(event)) for event in events]
    assert names[0] == "messageStart" and names[-2:] == ["messageStop", "metadata"]
    reasoning = "".join(
        e["contentBlockDelta"]["delta"]["reasoningContent"].get("text", "")
        for e in events
        if "reasoningContent" in e.get("contentBlockDelta", {}).get("delta", {})
    )
    text = "".join(
        e["contentBlockDelta"]["delta"].get("text", "") for e in events if "contentBlockDelta" in e
    )
    arguments = "".join(
        e["contentBlockDelta"]["delta"]["toolUse"]["input"]
        for e in events
        if "toolUse" in e.get("contentBlockDelta", {}).get("delta", {})
    )
    (start,) = [e["contentBlockStart"] for e in events if "contentBlockStart" in e]
    assert reasoning == "The user wants the weather." and text == "Let me look that up."
    assert start == {"start": {"toolUse": {"toolUseId": CALL.id, "name": "weather"}},
                     "contentBlockIndex": 2}  # fmt: skip
    assert arguments == '{"city":"Paris"}'
    assert events[-2]["messageStop"]["stopReason"] == "tool_use"
    assert events[-1]["metadata"]["usage"]["totalTokens"] == 172


def test_boto3_raises_bedrocks_exceptions_from_the_fakes_errors(
    server: Server, bedrock: Any
) -> None:
    server.fake.add(Fail(429), Fail(400, message="Input is too long for requested model."))
    with pytest.raises(bedrock.exceptions.ThrottlingException, match="Too many requests"):
        bedrock.converse(modelId=MODEL, messages=MESSAGES)
    with pytest.raises(bedrock.exceptions.ValidationException, match="Input is too long"):
        bedrock.converse(modelId=MODEL, messages=MESSAGES)


@pytest.mark.parametrize(
    ("kind", "code"),
    [("overloaded", "serviceUnavailableException"), ("rate_limit", "throttlingException")],
)
def test_boto3_reads_an_exception_frame_mid_stream(
    server: Server, bedrock: Any, kind: str, code: str
) -> None:
    server.fake.add(StreamError("Part of an answer", after=2, kind=kind))  # type: ignore[arg-type]
    response = bedrock.converse_stream(modelId=MODEL, messages=MESSAGES)
    seen = []
    with pytest.raises(EventStreamError) as failed:
        for event in response["stream"]:
            seen.append(next(iter(event)))
    assert seen[0] == "messageStart" and failed.value.response["Error"]["Code"] == code


def test_the_server_refuses_boto3_with_a_wrong_secret_as_aws_does(server: Server) -> None:
    wrong = client(server, secret="not-the-secret-0123456789")
    with pytest.raises(ClientError) as refused:
        wrong.converse(modelId=MODEL, messages=MESSAGES)
    error = refused.value.response["Error"]
    assert error["Code"] == "InvalidSignatureException"
    assert "signature we calculated does not match" in error["Message"]
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


@pytest.mark.anyio
@pytest.mark.one_backend  # bytes on the wire: the backend cannot matter
async def test_an_api_key_is_sent_as_botocore_sends_one(server: Server) -> None:
    from botocore.auth import BearerAuth
    from botocore.awsrequest import AWSRequest
    from botocore.tokens import FrozenAuthToken

    theirs = AWSRequest(method="POST", url="https://bedrock-runtime.us-east-1.amazonaws.com/")
    BearerAuth(FrozenAuthToken(API_KEY)).add_auth(theirs)  # (boto3 sends one over HTTPS only)
    fake = WireFake.bedrock(["Hi."])
    provider = Bedrock(MODEL, api_key=API_KEY, region=REGION, client=fake.client())
    assert [e async for e in provider.stream(ModelRequest(messages=[UserMessage.of("hi")]))]
    assert fake.requests[0].headers["authorization"] == theirs.headers["Authorization"]


@pytest.mark.anyio
@pytest.mark.one_backend  # bytes on the wire: the backend cannot matter
async def test_a_body_changed_after_signing_is_refused(server: Server) -> None:
    signer = AWSSigV4(region=REGION, session=_session())
    request = httpx.Request("POST", f"{server.url}/model/m/converse", json={"messages": []})
    signer.sign(request, _session().get_credentials().get_frozen_credentials())
    tampered = httpx.Request(
        "POST",
        request.url,
        headers=request.headers,
        content=b'{"messages":{}}',  # same length, other bytes
    )
    async with httpx.AsyncClient() as http:
        assert (await http.send(request)).status_code == 200
        refused = await http.send(tampered)
    assert refused.status_code == 403
    assert refused.headers["x-amzn-errortype"].startswith("InvalidSignatureException")


def _session() -> Any:
    import botocore.session

    session = botocore.session.Session()
    session.set_credentials(ACCESS_KEY, SECRET_KEY)
    return session


def _blobs(value: Any, key: str = "") -> Any:
    """JSON's base64 blobs as the bytes botocore's model says they are."""
    if isinstance(value, dict):
        return {k: _blobs(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_blobs(v) for v in value]
    if key in ("bytes", "redactedContent") and isinstance(value, str):
        return base64.b64decode(value)
    return value


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n-fake-").decode()


@pytest.mark.parametrize("model", [MODEL, "us.amazon.nova-pro-v1:0", "openai.gpt-oss-120b-1:0"])
def test_treadles_request_bodies_are_valid_converse_requests(model: str) -> None:
    history = [
        UserMessage(
            content=[
                TextContent(text="What is in this picture?"),
                ImageContent(data=PNG, mime_type="image/png"),
            ]
        ),
        AssistantMessage(content=RICH.content, provider="bedrock"),
        ToolResultMessage(
            tool_call_id=CALL.id,
            tool_name="weather",
            content=[TextContent(text="21 C"), ImageContent(data=PNG, mime_type="image/jpeg")],
            is_error=True,
        ),
        AssistantMessage(
            content=[
                ThinkingContent(
                    thinking="", signature=base64.b64encode(b"x").decode(), redacted=True
                ),
                TextContent(text="Done."),
            ],
            provider="bedrock",
        ),
        UserMessage.of("Thanks, and tomorrow?"),
    ]
    request = ModelRequest(
        system_prompt="Be brief.",
        messages=history,
        tools=[ToolSpec(name="weather", description="The weather.", parameters={"type": "object"})],
        tool_choice={"name": "weather"},
        max_tokens=512,
        temperature=0.5,
        top_p=0.9,
        stop=["END"],
        thinking_level="medium",
        response_format={"name": "answer", "schema": {"type": "object"}},
    )
    body = Bedrock(model, api_key="k", region=REGION).build_body(request)
    shape = (
        boto3.client(
            "bedrock-runtime", region_name=REGION, aws_access_key_id="a", aws_secret_access_key="b"
        )
        .meta.service_model.operation_model("ConverseStream")
        .input_shape
    )
    report = ParamValidator().validate({"modelId": model, **_blobs(body)}, shape)
    assert not report.has_errors(), report.generate_report()

"""Vertex AI's addresses, bodies and options: Gemini and Claude on Vertex reuse the Gemini and
Anthropic adapters' wire code, at the URLs google-genai and anthropic's AnthropicVertex use,
from the same environment variables (docs/cloud.md#vertex-ai). No I/O here: the exchanges
with local servers checking tokens are in test_vertex_live.py."""

from __future__ import annotations

import pytest

from treadle.errors import ConfigurationError, UsageError
from treadle.providers import (
    Anthropic,
    Gemini,
    GoogleAuth,
    ModelRequest,
    VertexAnthropic,
    VertexGemini,
    get_provider,
)
from treadle.types import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

VARIABLES = (
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_VERTEX_BASE_URL",
    "ANTHROPIC_VERTEX_PROJECT_ID",
    "CLOUD_ML_REGION",
    "ANTHROPIC_VERTEX_BASE_URL",
    "GOOGLE_APPLICATION_CREDENTIALS",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def token() -> str:
    return "ya29.test-token"


def test_the_host_follows_the_location_as_the_sdks_choose_it() -> None:
    cases = {
        "us-central1": "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/"
        "us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        "global": "https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers/"
        "google/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        "eu": "https://aiplatform.eu.rep.googleapis.com/v1/projects/p/locations/eu/publishers/"
        "google/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
    }
    for location, url in cases.items():
        model = VertexGemini("gemini-2.5-flash", project="p", location=location, auth=token)
        assert model.url("gemini-2.5-flash", stream=True) == url
    unary = VertexGemini("gemini-2.5-flash", project="p", location="us-east1", auth=token)
    assert unary.url("gemini-2.5-flash", stream=False).endswith(
        "/locations/us-east1/publishers/google/models/gemini-2.5-flash:generateContent"
    )


def test_claude_goes_to_anthropics_publisher_with_raw_predict() -> None:
    model = VertexAnthropic(
        "claude-sonnet-4-5@20250929", project="p", location="us-east5", auth=token
    )
    assert model.url(model.model, stream=True) == (
        "https://us-east5-aiplatform.googleapis.com/v1/projects/p/locations/us-east5/publishers/"
        "anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
    )
    assert model.url(model.model, stream=False).endswith(":rawPredict")


def test_project_and_location_come_from_the_environment_as_google_genai_reads_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "from-env")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "global")
    model = get_provider("vertex:gemini-2.5-flash", auth=token)
    assert isinstance(model, VertexGemini)
    assert (model.project, model.location) == ("from-env", "global")
    assert model.url(model.model, stream=True).startswith(
        "https://aiplatform.googleapis.com/v1/projects/from-env/locations/global/"
    )
    # An argument wins over the environment.
    given = VertexGemini("gemini-2.5-flash", project="given", location="europe-west4", auth=token)
    assert (given.project, given.location) == ("given", "europe-west4")


def test_without_a_location_it_is_global_as_google_genai_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "p")
    model = VertexGemini("gemini-2.5-flash", auth=token)
    assert model.location == "global"
    assert model.base_url == "https://aiplatform.googleapis.com"


def test_claude_also_reads_the_variables_anthropic_vertex_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "claude-project")
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    model = get_provider("vertex:claude-sonnet-4-5@20250929", auth=token)
    assert isinstance(model, VertexAnthropic)
    assert (model.project, model.location) == ("claude-project", "us-east5")
    # Google's own variables come first; Gemini never reads Anthropic's.
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "google-project")
    assert VertexAnthropic("claude-haiku-4-5", auth=token).project == "google-project"
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    with pytest.raises(ConfigurationError, match="needs a project"):
        VertexGemini("gemini-2.5-flash", auth=token)


def test_the_model_string_picks_the_publisher_and_takes_a_server_after_at() -> None:
    claude = get_provider(
        "vertex:claude-sonnet-4-5@20250929@http://127.0.0.1:9/v1", project="p", auth=token
    )
    assert isinstance(claude, VertexAnthropic)
    assert claude.model == "claude-sonnet-4-5@20250929"  # Vertex's version tag stays
    assert claude.url(claude.model, stream=True) == (
        "http://127.0.0.1:9/v1/projects/p/locations/global/publishers/anthropic/models/"
        "claude-sonnet-4-5@20250929:streamRawPredict"
    )
    gemini = get_provider("vertex:gemini-2.5-pro@http://127.0.0.1:9", project="p", auth=token)
    assert isinstance(gemini, VertexGemini)
    assert gemini.url("gemini-2.5-pro", stream=False) == (
        "http://127.0.0.1:9/v1/projects/p/locations/global/publishers/google/models/"
        "gemini-2.5-pro:generateContent"
    )


def test_base_url_replaces_the_host_and_keeps_a_version_it_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    beta = VertexGemini("m", project="p", base_url="https://proxy.test/v1beta1", auth=token)
    assert beta.url("m", stream=False).startswith("https://proxy.test/v1beta1/projects/p/")
    monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", "https://gateway.test")
    from_env = VertexGemini("m", project="p", auth=token)
    assert from_env.url("m", stream=False).startswith("https://gateway.test/v1/projects/p/")


def test_a_tuned_model_endpoint_is_a_resource_path() -> None:
    model = VertexGemini("endpoints/123", project="p", location="us-central1", auth=token)
    assert model.url("endpoints/123", stream=False) == (
        "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/"
        "endpoints/123:generateContent"
    )


def request() -> ModelRequest:
    weather = ToolSpec(name="weather", description="Weather.", parameters={"type": "object"})
    return ModelRequest(
        system_prompt="Be brief.",
        messages=[
            UserMessage.of("Weather in Oslo?"),
            AssistantMessage(
                content=[ToolCall(id="c1", name="weather", arguments={"city": "Oslo"})],
                stop_reason="tool_use",
                provider="anthropic",
            ),
            ToolResultMessage(tool_call_id="c1", tool_name="weather", content="Rain"),
        ],
        tools=[weather],
        temperature=0.2,
        max_tokens=300,
    )


def test_claude_on_vertex_sends_the_messages_body_with_its_version_in_place_of_the_model() -> None:
    vertex = VertexAnthropic("claude-sonnet-4-5@20250929", project="p", auth=token)
    direct = Anthropic("claude-sonnet-4-5", api_key="sk-test")
    body = vertex.build_body(request())
    expected = direct.build_body(request())
    del expected["model"]
    assert body == {"anthropic_version": "vertex-2023-10-16", **expected}
    assert "model" not in body
    assert next(iter(body)) == "anthropic_version"


def test_gemini_on_vertex_sends_the_gemini_body() -> None:
    vertex = VertexGemini("gemini-2.5-flash", project="p", auth=token)
    direct = Gemini("gemini-2.5-flash", api_key="key")
    assert vertex.build_body(request()) == direct.build_body(request())


def test_thought_signatures_go_back_only_to_the_api_that_made_them() -> None:
    """Gemini's signatures from the Gemini API are not sent to Vertex, nor Vertex's to the
    Gemini API: each gets the other's thinking as text."""
    thought = AssistantMessage(
        content=[ThinkingContent(thinking="Hmm", signature="sig-1"), TextContent(text="Hi")],
        provider="vertex",
    )
    history = ModelRequest(messages=[UserMessage.of("hi"), thought, UserMessage.of("and?")])
    vertex = VertexGemini("gemini-2.5-flash", project="p", auth=token).build_body(history)
    assert vertex["contents"][1]["parts"][0] == {
        "text": "Hmm",
        "thought": True,
        "thoughtSignature": "sig-1",
    }
    gemini = Gemini("gemini-2.5-flash", api_key="k").build_body(history)
    assert "thoughtSignature" not in str(gemini["contents"][1])


def test_vertex_takes_google_credentials_not_a_key() -> None:
    with pytest.raises(UsageError, match="not api_key="):
        VertexGemini("gemini-2.5-flash", project="p", api_key="AIza-key")
    with pytest.raises(UsageError, match="both credentials= and auth="):
        VertexAnthropic("claude-haiku-4-5", project="p", auth=token, credentials=object())
    with pytest.raises(ConfigurationError, match="not a location"):
        VertexGemini("gemini-2.5-flash", project="p", location="us-central1/x", auth=token)
    with pytest.raises(ConfigurationError, match="not a str"):
        GoogleAuth("path/to/key.json")


def test_without_auth_it_uses_application_default_credentials_found_on_first_use() -> None:
    """Constructing needs no credentials (nothing is read until a request); the default
    ``auth`` is a GoogleAuth over Application Default Credentials."""
    model = VertexGemini("gemini-2.5-flash", project="p")
    assert repr(model._auth) == "GoogleAuth(credentials=default)"
    assert "token" not in repr(model).lower()

"""A Vertex AI agent that falls back from Claude to Gemini, run against local fakes.

    pip install "treadle[vertex]"
    python examples/cloud_fallback.py

Everything is offline. Google's token endpoint is `GoogleOAuthFake`: it signs in a service
account of its own (an RSA key made at start) and checks each signed JWT assertion as
Google does. Its key file goes where Application Default Credentials look for one
(`GOOGLE_APPLICATION_CREDENTIALS`), so the adapters find their credentials, and their
project, exactly as on a real machine; google-auth signs and refreshes (in a worker thread).
Vertex itself is two wire fakes on loopback sockets that accept only live tokens: Claude is
overloaded, so `FallbackModel` moves the request on to Gemini, which calls a tool and answers.

With a real project, drop the fakes: `gcloud auth application-default login`, set
GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION, and use the model strings without `@url`.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import anyio

from treadle import Agent, AssistantMessage, ToolCall, tool
from treadle.providers import FallbackModel
from treadle.testing import Fail, GoogleOAuthFake, WireFake, serve
from treadle.types import ProviderFallback


@tool
def opening_hours(museum: str) -> str:
    """Today's opening hours of a museum."""
    return f"{museum}: 10:00 to 18:00"


async def main() -> None:
    oauth = GoogleOAuthFake()
    claude = WireFake.vertex_anthropic(default=Fail(529), gate=oauth.check)  # overloaded
    call = ToolCall(id="call_1", name="opening_hours", arguments={"museum": "Munch"})
    gemini = WireFake.vertex(
        [AssistantMessage(content=[call]), "The Munch museum is open from 10 to 18 today."],
        gate=oauth.check,
    )
    async with serve(oauth) as tokens, serve(claude) as claude_url, serve(gemini) as gemini_url:
        with tempfile.TemporaryDirectory() as folder:
            key = Path(folder) / "service-account.json"
            key.write_text(json.dumps(oauth.service_account_info(tokens + "/token")))
            os.environ["GOOGLE_APPLICATION_CREDENTIALS"] = str(key)  # what ADC reads
            os.environ["GOOGLE_CLOUD_LOCATION"] = "us-east5"

            model = FallbackModel(
                f"vertex:claude-sonnet-4-5@20250929@{claude_url}",
                f"vertex:gemini-2.5-flash@{gemini_url}",
            )
            agent = Agent(model, tools=[opening_hours])
            async with agent.stream("When is the Munch museum open today?") as events:
                async for event in events:
                    if isinstance(event, ProviderFallback):
                        print(
                            f"{event.from_provider}:{event.from_model} failed "
                            f"({event.error_kind}, HTTP {event.status_code}): falling back to "
                            f"{event.to_provider}:{event.to_model}"
                        )
            result = events.result
            await model.aclose()

    print(result.text)
    for name, usage in result.usage_by_model.items():
        cost = f"${usage.cost_usd:.6f}" if usage.cost_usd is not None else "no price"
        print(f"  {name}: {usage.input} in, {usage.output} out, {cost}")
    print(f"  Vertex paths: {gemini.requests[0].path}")
    issued = len(oauth.issued)
    print(f"  tokens issued by the local token endpoint: {issued}; all offline")


if __name__ == "__main__":
    try:
        import google.auth  # noqa: F401
    except ImportError:
        print("offline example skipped: it needs google-auth (pip install 'treadle[vertex]')")
    else:
        anyio.run(main)

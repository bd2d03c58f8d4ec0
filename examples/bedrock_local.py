"""An agent on AWS Bedrock, against a local Bedrock that checks signatures as AWS does.

    python examples/bedrock_local.py

Offline and without an AWS account: `SigV4Check(WireFake.bedrock([...]))` answers the real
Converse Stream bytes (eventstream frames) from a script, after recomputing each request's
SigV4 signature with botocore from a secret it knows, and refuses a wrong one with AWS's
403. The agent is configured the way it would be for the real service, through the model
string and the environment (docs/cloud.md#aws-bedrock): keys, region, and the endpoint
override boto3 reads. Needs `pip install 'treadle[bedrock]'` (botocore) for the signing.
"""

from __future__ import annotations

import os

import anyio

from treadle import Agent, AssistantMessage, TextContent, ToolCall, tool
from treadle.loop import RetryPolicy
from treadle.testing import Fail, SigV4Check, WireFake, serve

KEY_ID, SECRET = "AKIDLOCALEXAMPLE", "local-secret-for-the-example"
MODEL = "bedrock:anthropic.claude-3-5-sonnet-20241022-v2:0"


@tool
def weather(city: str) -> str:
    """The current weather in a city."""
    return f"{city}: 21 C and clear"


async def main() -> None:
    print("offline: a local Bedrock on 127.0.0.1 checks each signature; no AWS account")
    script = [
        Fail(429),  # a ThrottlingException: retried
        AssistantMessage(
            content=[ToolCall(id="tooluse_1", name="weather", arguments={"city": "Lisbon"})]
        ),
        AssistantMessage(content=[TextContent(text="It is 21 C and clear in Lisbon.")]),
    ]
    bedrock = SigV4Check(WireFake.bedrock(script), credentials={KEY_ID: SECRET})
    async with serve(bedrock) as url:
        os.environ.update(
            AWS_ACCESS_KEY_ID=KEY_ID,
            AWS_SECRET_ACCESS_KEY=SECRET,
            AWS_REGION="us-east-1",
            AWS_ENDPOINT_URL_BEDROCK_RUNTIME=url,  # as boto3 reads it
            AWS_EC2_METADATA_DISABLED="true",
        )
        agent = Agent(MODEL, tools=[weather], retry=RetryPolicy(initial_delay_s=0.01))
        result = await agent.run("What is the weather in Lisbon?")
        print("answer:", result.text)
        print("signed requests accepted:", len(bedrock.accepted))

        os.environ["AWS_SECRET_ACCESS_KEY"] = "a-wrong-secret"
        refused = await Agent(MODEL).run("Hello?")
        assert refused.error is not None
        print("with a wrong secret:", refused.error.kind, "-", refused.error.message[:70], "…")


if __name__ == "__main__":
    anyio.run(main)

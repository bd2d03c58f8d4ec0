"""ImageContent.from_bytes, and an image reaching the provider's wire format."""

from __future__ import annotations

import base64

import pytest

from treadle import Agent, UserMessage
from treadle.testing import WireFake
from treadle.types import ImageContent

pytestmark = pytest.mark.anyio

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)


def test_from_bytes_encodes_and_checks_the_type() -> None:
    image = ImageContent.from_bytes(PNG, "image/png")
    assert base64.b64decode(image.data) == PNG and image.mime_type == "image/png"
    with pytest.raises(ValueError, match="image type"):
        ImageContent.from_bytes(PNG, "text/plain")


async def test_an_image_in_the_prompt_reaches_the_openai_wire() -> None:
    fake = WireFake.openai("Red.")
    agent = Agent(fake.provider("gpt-4o-mini", api_key="k"))
    result = await agent.run(UserMessage.of("Colour?", ImageContent.from_bytes(PNG, "image/png")))
    assert result.text == "Red."
    parts = fake.requests[0].json["messages"][-1]["content"]
    urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert urls == ["data:image/png;base64," + base64.b64encode(PNG).decode()]

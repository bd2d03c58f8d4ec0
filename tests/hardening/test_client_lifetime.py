"""An adapter's HTTP client does not outlive the event loop it was made for: run_sync, which
makes a loop per call, closes the client the Agent's own adapter opened for it."""

from __future__ import annotations

import anyio
from anyio.from_thread import start_blocking_portal

from treadle import Agent, AgentContext, AgentLoopConfig, agent_loop
from treadle.providers import OpenAIChat
from treadle.testing import WireFake, serve


def test_run_sync_closes_the_client_it_opened() -> None:
    fake = WireFake.openai(default="hi")
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(serve(fake)) as url:
        agent = Agent("openai:gpt-4o-mini", api_key="k", base_url=f"{url}/v1")
        clients = []
        for _ in range(3):
            assert agent.run_sync("hello").text == "hi"
            clients.append(agent.provider._client)  # type: ignore[attr-defined]
    assert clients == [None, None, None]  # closed after each call, nothing left to leak
    assert len(fake.requests) == 3


def test_run_sync_leaves_a_borrowed_provider_open() -> None:
    fake = WireFake.openai(default="hi")
    provider = fake.provider("gpt-4o-mini", api_key="k")
    agent = Agent(provider)
    agent.run_sync("hello")
    assert not provider.client.is_closed  # the caller's object: the caller closes it
    anyio.run(provider.aclose)


def test_an_owned_client_is_made_anew_on_another_event_loop() -> None:
    """An adapter used from one event loop, then another (no ``aclose`` between), gets a
    client and a request queue of the new loop's own: the old ones belong to a loop that
    is gone (trio's then asyncio's here, so nothing of the first could work)."""
    fake = WireFake.openai(default="hi")
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(serve(fake)) as url:
        provider = OpenAIChat("gpt-4o-mini", api_key="k", base_url=f"{url}/v1")
        config = AgentLoopConfig(provider=provider)

        async def once(close: bool) -> tuple[str, object]:
            new = await agent_loop("hello", AgentContext(), config)
            client = provider.client
            if close:  # on the loop the client belongs to
                await provider.aclose()
            return new[-1].text, client  # type: ignore[union-attr]

        first = anyio.run(once, False, backend="trio")
        second = anyio.run(once, True, backend="asyncio")
    assert first[0] == second[0] == "hi"
    assert first[1] is not second[1]
    assert len(fake.requests) == 2

"""Where treadle's fixed cost per run sits: the provider adapter, or the loop around it.

``loop_cost.py`` gives what treadle adds to a run over the hand-written httpx loop. This
script splits it, with the same in-process replay of the kit's fake server (a 1-token final
answer, so nearly all of it is fixed cost: 3 requests, 2 tool calls):

- **adapter**: ``OpenAIChat.stream`` alone for the run's three recorded requests (encoding
  the body, the HTTP exchange, parsing the stream, building the message), against the raw
  loop's own three requests as it makes them (``json=`` body, ``aiter_lines``,
  ``json.loads``);
- **loop**: ``agent_loop`` with a provider that replays the adapter's recorded stream events
  (fresh copies each run): turns, tool calls, the history, request building, no HTTP.

The two parts are measured apart, so they need not add up to the whole run: the rest is
where they meet (and the cache pressure of running both). CPU per run, least of the
repetitions, the cycle collector paused while timing:

    python benchmarks/loop_parts.py [--reps 9] [--runs 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "kit"))

import httpx  # noqa: E402
import loop_cost  # noqa: E402  (the in-process replay of the kit's server)
import raw_httpx  # noqa: E402  (the kit's hand-written loop)
import treadle_driver  # noqa: E402  (treadle as loop_overhead.py drives it)

from treadle import AgentLoopConfig  # noqa: E402
from treadle.providers import OpenAIChat  # noqa: E402
from treadle.providers.base import ModelRequest  # noqa: E402

Work = Callable[[], Awaitable[Any]]
MODEL = "fake-sequential"


class Recorder:
    """Passes every call to ``inner``, keeping each request and the events it streamed."""

    def __init__(self, inner: OpenAIChat) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: list[tuple[ModelRequest, list[Any]]] = []

    async def stream(self, request: ModelRequest, *, cancel: Any = None) -> AsyncIterator[Any]:
        events: list[Any] = []
        self.calls.append((request, events))
        async for event in self.inner.stream(request, cancel=cancel):
            events.append(event)
            yield event


class Replay:
    """A provider that streams the recorded events again, a fresh copy for every call (the
    loop records and may annotate the final message, as it would a new one)."""

    name = "openai"

    def __init__(self, recorded: list[list[Any]]) -> None:
        self.recorded = recorded
        self.ready: list[list[Any]] = []  # copies made before the timing starts

    def prepare(self, runs: int) -> None:
        self.ready = [
            [event.model_copy(deep=True) for event in events]
            for _ in range(runs)
            for events in self.recorded
        ]
        self.ready.reverse()

    async def stream(self, request: ModelRequest, *, cancel: Any = None) -> AsyncIterator[Any]:
        for event in self.ready.pop():
            yield event


async def _raw_bodies(mock: httpx.MockTransport) -> list[Any]:
    """The request bodies of one run of the raw loop, as the JSON it passed to httpx."""
    bodies: list[Any] = []

    async def keep(request: httpx.Request) -> None:
        bodies.append(json.loads(request.read()))

    hooks = {"request": [keep]}
    async with httpx.AsyncClient(
        base_url="http://fake/v1", transport=mock, event_hooks=hooks
    ) as client:
        await raw_httpx.agent_loop(client, MODEL)()
    return bodies


async def measure(reps: int, runs: int) -> dict[str, float]:
    mock = loop_cost.transport(1)
    raw_client = httpx.AsyncClient(base_url="http://fake/v1", transport=mock)
    client = httpx.AsyncClient(transport=mock)
    provider = OpenAIChat(MODEL, base_url="http://fake/v1", api_key="sk-fake", client=client)
    recorder = Recorder(provider)
    add = treadle_driver.add_async
    run_treadle = treadle_driver.runs(AgentLoopConfig(provider=provider), add)[0]
    await treadle_driver.runs(AgentLoopConfig(provider=recorder), add)[0]()
    requests = [request for request, _ in recorder.calls]
    replay = Replay([events for _, events in recorder.calls])
    run_loop = treadle_driver.runs(AgentLoopConfig(provider=replay), add)[0]
    bodies = await _raw_bodies(mock)

    async def adapter() -> None:
        for request in requests:
            async for _ in provider.stream(request):
                pass

    async def raw_requests() -> None:
        for body in bodies:
            async with raw_client.stream("POST", "/chat/completions", json=body) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: ") and line[6:] != "[DONE]":
                        json.loads(line[6:])

    work: dict[str, tuple[Work, bool]] = {  # name: (one run, whether it replays)
        "raw loop, whole run": (raw_httpx.agent_loop(raw_client, MODEL), False),
        "treadle, whole run": (run_treadle, False),
        "raw loop, its 3 requests": (raw_requests, False),
        "treadle adapter, the same 3 requests": (adapter, False),
        "treadle loop, replayed events": (run_loop, True),
    }
    expected = await work["raw loop, whole run"][0]()
    for name, (run, replays) in work.items():  # warm up; a whole run must give the answer
        if replays:
            replay.prepare(10)
        for _ in range(10):
            answer = await run()
            if answer is not None and answer != expected:
                raise SystemExit(f"{name} did not give the fake server's answer: {answer!r}")
    best = {name: float("inf") for name in work}
    for _ in range(reps):
        for name, (run, replays) in work.items():
            if replays:
                replay.prepare(runs)
            best[name] = min(best[name], await loop_cost.cpu_per_run(run, runs))
    await raw_client.aclose()
    await client.aclose()
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=9, help="interleaved repetitions")
    parser.add_argument("--runs", type=int, default=200, help="runs per repetition")
    opts = parser.parse_args()
    best = asyncio.run(measure(opts.reps, opts.runs))
    print(f"CPU per run, in process (least of {opts.reps} x {opts.runs} runs), µs")
    for name, spent in best.items():
        print(f"  {name:<40}{spent:>8.0f}")
    whole = best["treadle, whole run"] - best["raw loop, whole run"]
    adapter = best["treadle adapter, the same 3 requests"] - best["raw loop, its 3 requests"]
    loop = best["treadle loop, replayed events"]
    print(f"treadle over the raw loop: {whole:.0f} µs a run")
    print(f"  adapter over the raw loop's requests: {adapter:.0f} µs")
    print(f"  loop (no HTTP): {loop:.0f} µs")
    print(f"  where they meet (the rest): {whole - adapter - loop:.0f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What treadle itself costs per run, without a network or a server process to add noise.

Replays the benchmark kit's fake OpenAI server (``benchmarks/kit/fake_llm.py``) in process,
through ``httpx.MockTransport``, one HTTP chunk per streamed event as a socket would deliver
them. The hand-written httpx loop of the kit and treadle run the same scenario (two tool
calls, then a streamed answer) on the same transport, interleaved; CPU time per run is the
least over the repetitions (the cycle collector paused while timing, so a collection that
happens to fall in one repetition does not decide it).

Two answer lengths separate treadle's fixed costs (per run: the requests, the tool calls,
the events) from its cost per streamed delta:

    python benchmarks/loop_cost.py [--reps 9] [--runs 100]

This is the figure to watch when changing the loop: ``loop_overhead.py`` measures the same
thing end to end over real sockets, where the network stack and the server's timing add
milliseconds of noise a change of 50 µs hides in.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "kit"))

import fake_llm  # noqa: E402
import httpx  # noqa: E402
import raw_httpx  # noqa: E402  (the kit's hand-written loop)
import treadle_driver  # noqa: E402  (treadle as loop_overhead.py drives it)

from treadle import AgentLoopConfig  # noqa: E402
from treadle.providers import OpenAIChat  # noqa: E402

Run = Callable[[], Awaitable[str]]


class _Chunks(httpx.AsyncByteStream):
    """The chunks with no checkpoint between them, as from a socket read that holds them all
    (``treadle.testing.WireFake`` makes one per chunk, like a slow network: not this case)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def _unframe(part: bytes) -> bytes:
    """One HTTP/1.1 chunk's payload (the fake server writes its stream chunked)."""
    size, _, rest = part.partition(b"\r\n")
    return rest[: int(size, 16)]


def transport(final_tokens: int) -> httpx.MockTransport:
    """The fake server's answers, as a transport: the same bodies, chunk by chunk."""
    server = fake_llm.FakeServer(final_n=final_tokens)
    bodies: dict[int, list[bytes]] = {}

    def handle(request: httpx.Request) -> httpx.Response:
        payload, _ = server.handle_chat(json.loads(request.content), len(request.content))
        chunks = bodies.get(id(payload))
        if chunks is None:
            chunks = bodies[id(payload)] = [_unframe(part) for part in payload]
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=_Chunks(chunks))

    return httpx.MockTransport(handle)


async def cpu_per_run(run: Callable[[], Awaitable[object]], runs: int) -> float:
    """µs of CPU per call of ``run`` over ``runs`` calls, the cycle collector paused (a
    collection that happens to fall in one repetition must not decide it)."""
    gc.collect()
    gc.disable()
    try:
        start = time.process_time()
        for _ in range(runs):
            await run()
        return (time.process_time() - start) / runs * 1e6
    finally:
        gc.enable()


async def measure(final_tokens: int, reps: int, runs: int) -> dict[str, float]:
    """µs of CPU per run for each driver: the least over ``reps`` interleaved repetitions."""
    mock = transport(final_tokens)
    raw_client = httpx.AsyncClient(base_url="http://fake/v1", transport=mock)
    provider = OpenAIChat(
        "fake-sequential",
        base_url="http://fake/v1",
        api_key="sk-fake",
        client=httpx.AsyncClient(transport=mock),
    )
    config = AgentLoopConfig(provider=provider)
    quiet, consumed = treadle_driver.runs(config, treadle_driver.add_async)
    drivers: dict[str, Run] = {
        "raw httpx loop": raw_httpx.agent_loop(raw_client, "fake-sequential"),
        "treadle, events=None, async def tool": quiet,
        "treadle, events=None, sync tool": treadle_driver.runs(config, treadle_driver.add_sync)[0],
        "treadle, iter_events consumer, async def tool": consumed,
    }
    expected = await drivers["raw httpx loop"]()
    for name, run in drivers.items():
        for _ in range(10):
            if await run() != expected:
                raise SystemExit(f"{name} did not give the fake server's answer")
    best = {name: float("inf") for name in drivers}
    for _ in range(reps):
        for name, run in drivers.items():
            best[name] = min(best[name], await cpu_per_run(run, runs))
    await raw_client.aclose()
    await provider.aclose()
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=9, help="interleaved repetitions")
    parser.add_argument("--runs", type=int, default=100, help="runs per repetition")
    opts = parser.parse_args()
    short, long = 1, 401  # answer tokens: the difference gives the cost per delta
    results = {n: asyncio.run(measure(n, opts.reps, opts.runs)) for n in (short, long)}
    raw = "raw httpx loop"
    print(f"CPU per run, in process (least of {opts.reps} x {opts.runs} runs), µs")
    print(f"{'driver':<48}{'1-token':>9}{'401-token':>11}{'fixed +':>9}{'per delta +':>13}")
    for name in results[short]:
        a, b = results[short][name], results[long][name]
        fixed = a - results[short][raw]
        per_delta = ((b - a) - (results[long][raw] - results[short][raw])) / (long - short)
        extra = "" if name == raw else f"{fixed:>9.0f}{per_delta:>13.2f}"
        print(f"{name:<48}{a:>9.0f}{b:>11.0f}{extra}")
    print(
        "fixed +: µs per run over the raw loop with a 1-token answer (2 tool calls, 3 "
        "requests); per delta +: µs per streamed delta over the raw loop's own"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

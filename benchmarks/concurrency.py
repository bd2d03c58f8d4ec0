"""Many concurrent runs on one provider adapter, against the benchmark kit's fake server.

Starts ``benchmarks/kit/fake_llm.py`` on a free loopback port, then runs ``--runs`` agent
loops at once (a tool call, a second tool call, a streamed answer: 3 requests each) through
ONE ``OpenAIChat`` adapter, and prints how many completed, the wall time, peak RSS, memory
per run, and the memory left after the runs ended.

    python benchmarks/concurrency.py [--runs 1000] [--max-connections 100]
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import time

from fake_server import fake_server


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--max-connections", type=int, default=None)
    opts = parser.parse_args()

    with fake_server() as root:
        return run(root + "/v1", opts)


def run(base_url: str, opts: argparse.Namespace) -> int:
    import anyio

    from treadle import AgentContext, AgentLoopConfig, UserMessage, agent_loop, tool
    from treadle.providers import OpenAIChat

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    options = {}
    if opts.max_connections:
        options["max_connections"] = opts.max_connections
    provider = OpenAIChat("fake-sequential", base_url=base_url, api_key="fake", **options)
    config = AgentLoopConfig(provider=provider)
    outcomes: dict[str, int] = {}

    async def one() -> None:
        context = AgentContext(tools=[add])
        new = await agent_loop([UserMessage.of("What is 2 + 3?")], context, config)
        last = new[-1]
        ok = getattr(last, "stop_reason", "") == "stop" and "5" in getattr(last, "text", "")
        key = "completed" if ok else f"failed: {getattr(getattr(last, 'error', None), 'kind', '?')}"
        outcomes[key] = outcomes.get(key, 0) + 1

    async def all_runs() -> float:
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(opts.runs):
                tg.start_soon(one)
        return time.perf_counter() - started

    gc.collect()
    before = rss_mb()
    wall = anyio.run(all_runs)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gc.collect()
    after = rss_mb()
    again = anyio.run(all_runs)  # a second batch: memory that leaked per run would grow now
    gc.collect()
    after_again = rss_mb()
    print(f"{opts.runs} concurrent runs on one adapter (3 requests each, 2 tool calls), twice")
    for key, count in sorted(outcomes.items()):
        print(f"  {key}: {count}")
    print(f"  wall time {wall:.2f} s ({opts.runs * 3 / wall:.0f} requests/s); again {again:.2f} s")
    print(f"  RSS before {before:.1f} MB, peak {peak:.1f} MB, after {after:.1f} MB")
    print(f"  memory per concurrent run ~{(peak - before) * 1024 / opts.runs:.0f} KB")
    print(f"  after a second batch {after_again:.1f} MB ({after_again - after:+.1f} MB: no growth")
    print("  means nothing is kept per finished run; the allocator keeps its arenas)")
    return 0 if outcomes.get("completed", 0) == 2 * opts.runs else 1


if __name__ == "__main__":
    raise SystemExit(main())

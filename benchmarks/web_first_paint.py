"""How fast the ``treadle ui`` page paints on loopback, and how much it sends.

Serves the offline demo (``treadle ui``) on 127.0.0.1, loads the page in headless chromium
with the cache disabled ``--runs`` times, and reports the median first contentful paint
(the browser's own ``paint`` timing) and the bytes of the page and its assets as sent.
Targets: first paint under 200 ms, assets under 150 KB.

    python benchmarks/web_first_paint.py [--runs 7]      # needs chromium and the web extra
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from screenshots import chromium_tab, find_chromium, serve_demo, wait

PAINT = (
    "performance.getEntriesByType('paint')"
    ".find(e => e.name === 'first-contentful-paint')?.startTime ?? null"
)
SIZES = (
    "[performance.getEntriesByType('navigation')[0], "
    "...performance.getEntriesByType('resource').filter(r => r.name.includes('/static/'))]"
    ".map(e => [e.name, e.encodedBodySize])"
)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:
        print("first paint: not measured (chromium is not installed)")
        return 0
    paints: list[float] = []
    floor: list[float] = []
    sizes: list[list[object]] = []
    with serve_demo() as url, chromium_tab(chromium) as (tab, _):
        tab.call("Network.enable")
        tab.call("Network.setCacheDisabled", cacheDisabled=True)
        for _ in range(args.runs):
            tab.call("Page.navigate", url="about:blank")
            tab.call("Page.navigate", url=url)
            wait(lambda: tab.js("document.body?.dataset.ready === 'true'"), "the page")
            paints.append(float(wait(lambda: tab.js(PAINT), "the first paint")))
            sizes = tab.js(SIZES)
            # the browser's own floor: a one-line JSON page from the same server
            tab.call("Page.navigate", url="about:blank")
            tab.call("Page.navigate", url=url + "api/info")
            floor.append(float(wait(lambda: tab.js(PAINT), "the first paint")))
    total = sum(int(str(size)) for _, size in sizes)
    print(
        f"first paint: median {statistics.median(paints):.0f} ms over {len(paints)} loads "
        f"(min {min(paints):.0f}, max {max(paints):.0f}); target < 200 ms"
    )
    print(
        f"browser floor (a one-line JSON page, same server): median "
        f"{statistics.median(floor):.0f} ms"
    )
    for name, size in sizes:
        print(f"  {str(name).rsplit('/', 1)[-1] or 'index.html'}: {int(str(size)) / 1024:.1f} KB")
    print(f"assets as sent: {total / 1024:.1f} KB; target < 150 KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

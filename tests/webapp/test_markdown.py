"""The page's Markdown in chromium: a long adversarial line renders in linear time (the
regex it replaces took minutes on this input: a 160 KB answer froze the tab for 20 s), and
the scanner renders every short line exactly as that regex did."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from tests.browser import needs_chromium

from .page import WebPage, open_tab

pytestmark = [needs_chromium, pytest.mark.slow]
# no test here acts while an answer streams: the model answers at a quick pace (conftest.py)
STREAM_DELAY = "0.005"

# the inline rule app.js had before: the reference for what each line should render as
REGEX_INLINE = r"""
(text, into) => {
  const re = new RegExp([
    /(`+)([^`]+?)\1/.source,
    /\*\*([^*]+?)\*\*/.source,
    /(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])/.source,
    /(?<!\w)_([^_\s][^_]*?)_(?!\w)/.source,
    /\[([^\]]+)\]\(([^)\s]+)\)/.source,
  ].join("|"), "g");
  const self = window.__regexInline;
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > last) into.append(document.createTextNode(text.slice(last, m.index)));
    if (m[2] !== undefined) into.append(el("code", { text: m[2] }));
    else if (m[3] !== undefined) { const b = el("strong"); self(m[3], b); into.append(b); }
    else if (m[4] !== undefined || m[5] !== undefined) {
      const i = el("em"); self(m[4] ?? m[5], i); into.append(i);
    } else if (m[6] !== undefined) {
      const href = m[7];
      if (/^https?:\/\//i.test(href)) {
        const a = el("a", { rel: "noopener noreferrer", target: "_blank" });
        a.href = href;
        a.textContent = m[6];
        into.append(a);
      } else into.append(document.createTextNode(m[0]));
    }
    last = m.index + m[0].length;
  }
  if (last < text.length) into.append(document.createTextNode(text.slice(last)));
}
"""


@pytest.fixture
def page(web_server: str, chromium: str) -> Iterator[WebPage]:
    with open_tab(chromium, web_server + "/") as tab:
        yield tab


def test_a_long_adversarial_line_renders_in_linear_time(page: WebPage) -> None:
    # every "[" opens a link whose "](" or ")" never comes: a backtracking regex scans to
    # the end of the line from each one (about 2 minutes here); the scanner, one pass.
    # (the DevTools call gives up after 30 s, so a quadratic renderer fails this test)
    line = "[a " * 70_000 + "[x](y" * 40_000 + " **b** `c` _d_ *e* [f](https://g.example)"
    assert len(line) > 400_000
    rendered = page.js(
        "(() => { const div = document.createElement('div');"
        f" markdown({json.dumps(line)}, div);"
        " return [div.textContent.length, div.querySelectorAll('strong, code, em, a').length]; })()"
    )
    marks = "****``__**[](https://g.example)"  # the last five's marks are not text
    assert rendered == [len(line) - len(marks), 5]


def test_long_table_lines_render_in_linear_time(page: WebPage) -> None:
    # a row-long rule regex with optional spaces and pipes backtracks quadratically on a
    # long run of spaces; cells are cut in one pass and each checked alone
    spaces = " " * 200_000
    text = (
        f"a | b\n{spaces}|{spaces}x\n\n"  # not a rule: no table
        + "h1 | h2\n--- | ---\n"
        + ("x\\|y" * 30_000 + " | end\n") * 3  # 90,000 escaped pipes in body rows
    )
    rendered = page.js(
        "(() => { const div = document.createElement('div');"
        f" markdown({json.dumps(text)}, div);"
        " return [div.querySelectorAll('table').length, div.querySelectorAll('tr').length,"
        " div.querySelector('td').textContent.length]; })()"
    )
    assert rendered[:2] == [1, 4]  # one table: its header and three rows
    assert rendered[2] == len("x|y" * 30_000)  # an escaped pipe is the cell's text


def test_the_scanner_renders_every_short_line_as_the_regex_did(page: WebPage) -> None:
    page.js(f"window.__regexInline = {REGEX_INLINE}; true")
    mismatches = page.js(
        """(() => {
      const alphabet = ["`", "``", "*", "**", "_", "[", "]", "(", ")", " ", "a", "b",
                        "https://x.example", "javascript:x", "\\u00a0", "1", "\\t", "é"];
      const shape = (node) => [...node.childNodes].map((c) => c.nodeType === 3
        ? JSON.stringify(c.textContent)
        : `<${c.tagName}${c.href ? " " + c.href : ""}>${shape(c)}</${c.tagName}>`).join("");
      let seed = 7;
      const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
      const bad = [];
      for (let n = 0; n < 20000; n += 1) {
        let text = "";
        for (let k = 1 + Math.floor(random() * 14); k > 0; k -= 1) {
          text += alphabet[Math.floor(random() * alphabet.length)];
        }
        const ours = document.createElement("div"), theirs = document.createElement("div");
        inline(text, ours);
        window.__regexInline(text, theirs);
        if (shape(ours) !== shape(theirs)) bad.push([text, shape(ours), shape(theirs)]);
      }
      return bad.slice(0, 5);
    })()"""
    )
    assert mismatches == []

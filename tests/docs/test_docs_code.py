"""Every Python block in README.md and docs/*.md runs, so a renamed API fails here first.

A page's blocks run in order in one namespace, like a notebook, with top-level ``await``
allowed. Requests to the providers' public hosts are answered by a wire-level fake (see
``docs_fake.py``), and fake keys are set, so the blocks run as a reader would paste them.

A block that is deliberately partial (it uses names the page only describes) is marked by
the line ``<!-- docs-test: partial -->`` just before its fence: its imports still run and
the rest must compile. A block that goes on from an earlier one (it uses names an earlier
block of the page made) is marked ``<!-- docs-test: continued -->``; any other block must
stand alone, as a reader who copies only it would run it (checked: it uses no name it does
not make or import).
"""

from __future__ import annotations

import ast
import builtins
import inspect
import os
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import respx
from tests.docs.docs_fake import docs_router

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)
PARTIAL = "<!-- docs-test: partial -->"
CONTINUED = "<!-- docs-test: continued -->"


@dataclass
class Block:
    page: Path
    line: int
    code: str
    partial: bool
    continued: bool = False


def blocks_of(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        line = text.count("\n", 0, match.start()) + 2
        found.append(
            Block(
                page, line, match.group(1), partial=before == PARTIAL, continued=before == CONTINUED
            )
        )
    return found


def _run(code: str, filename: str, namespace: dict[str, Any]) -> None:
    compiled = compile(code, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if compiled.co_flags & inspect.CO_COROUTINE:

        async def main() -> None:
            await eval(compiled, namespace)

        anyio.run(main)
    else:
        exec(compiled, namespace)


def _imports_only(code: str) -> str:
    tree = ast.parse(code)
    kept = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    return ast.unparse(ast.Module(body=kept, type_ignores=[]))


PAGES_WITH_CODE = [page for page in PAGES if blocks_of(page)]


def free_names(code: str) -> list[str]:
    """The names ``code`` reads that it neither makes nor imports (nor are builtins)."""
    made = set(dir(builtins))
    read: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else made).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            made.add(node.name)
        elif isinstance(node, ast.arg):
            made.add(node.arg)
        elif isinstance(node, ast.alias):
            made.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            made.add(node.name)
        elif isinstance(node, ast.MatchAs) and node.name:
            made.add(node.name)
    return sorted(read - made)


def test_a_block_that_goes_on_from_an_earlier_one_is_marked() -> None:
    unmarked = [
        f"{b.page.relative_to(ROOT)}:{b.line} uses {', '.join(free_names(b.code))}"
        for page in PAGES_WITH_CODE
        for b in blocks_of(page)
        if not (b.partial or b.continued) and free_names(b.code)
    ]
    assert not unmarked, (
        "these blocks use names an earlier block made: mark each with "
        f"{CONTINUED} just before its fence (or make it stand alone): {unmarked}"
    )


def test_the_pages_have_code() -> None:
    assert len(PAGES_WITH_CODE) >= 6
    assert sum(len(blocks_of(p)) for p in PAGES_WITH_CODE) >= 30


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_code_runs(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GROQ_API_KEY"):
        monkeypatch.setenv(name, "docs-test-key")
    # Azure OpenAI as docs/cloud.md's reader sets it up (answered by docs_fake's AzureFake)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://my-resource.openai.azure.com")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "docs-test-key")
    for name in ("OPENAI_API_VERSION", "AZURE_OPENAI_AD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name in [n for n in os.environ if n.startswith("AWS_")]:  # no developer's AWS setup
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "docs-test-key")  # docs/cloud.md
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("TREADLE_MODEL", raising=False)
    module = types.ModuleType(f"docs_{page.stem}")  # dataclasses look their module up
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace: dict[str, Any] = module.__dict__
    with respx.mock(assert_all_called=False) as router:
        docs_router(router)
        for block in blocks_of(page):
            where = f"{page.relative_to(ROOT)}:{block.line}"
            code = _imports_only(block.code) if block.partial else block.code
            if block.partial:
                compile(block.code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            try:
                _run(code, where, namespace)
            except BaseException as exc:  # report which block broke, with the page's line
                pytest.fail(f"the block at {where} failed: {type(exc).__name__}: {exc}")

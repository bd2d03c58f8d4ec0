"""Every Python snippet of docs/ext.md is a complete script: run on its own with
``python snippet.py`` in an empty folder (no top-level ``await``, no names from earlier
snippets), it exits 0. test_docs_code.py runs the page as a notebook; this runs it the way
a reader copies one snippet: ``python snippet.py`` from its first line, in a process forked
from one that has imported treadle and treadle.testing (tests/preloaded.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.docs.test_docs_code import ROOT, Block, blocks_of
from tests.preloaded import Preloader

PAGE = ROOT / "docs" / "ext.md"
BLOCKS = blocks_of(PAGE)


def test_the_page_has_snippets() -> None:
    assert len(BLOCKS) >= 10 and not any(b.partial for b in BLOCKS)


@pytest.fixture(scope="module")
def preloader() -> Iterator[Preloader]:
    preloader = Preloader("treadle", "treadle.testing")
    yield preloader
    preloader.close()


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"line{b.line}")
def test_snippet_runs_as_a_script(block: Block, tmp_path: Path, preloader: Preloader) -> None:
    code = block.code
    compile(code, "snippet.py", "exec")  # plain Python: a top-level await is a SyntaxError
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run(
        preloader.command(script), cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    where = f"docs/ext.md:{block.line}"
    assert done.returncode == 0, f"the snippet at {where} failed:\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, f"the snippet at {where} logged an error"

"""Files in the web page, in headless chromium against ``treadle ui``: a PDF attached with
the button (the file input, set as a person choosing a file sets it) is shown as a chip
and reaches the model as a file; a CSV dropped on the page and an image pasted into the
box are attached too (the image previewed); a tool's image is shown in the chat and in the
inspector; a reload shows them all again from the stored session; a file too large for
the server's body limit is refused in the page with the reason."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.browser import needs_chromium

from .page import WebPage, open_tab

pytestmark = [needs_chromium, pytest.mark.slow]
# no test here acts while an answer streams: the model answers at a quick pace (conftest.py)
STREAM_DELAY = "0.005"

PDF = b"%PDF-1.7\n1 0 obj <</Type /Page>> endobj\n"
PNG_HEX = (  # 1x1, blue (the scripted agent's chart too)
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d4944415478da63d0aa7af41f0004de0286929fa3ba"
    "0000000049454e44ae426082"
)


@pytest.fixture
def page(web_server: str, chromium: str) -> Iterator[WebPage]:
    with open_tab(chromium, web_server + "/") as tab:
        tab.size(1400, 800)
        yield tab


def choose_files(page: WebPage, *paths: Path) -> None:
    """What a person choosing files in the dialog the Attach button opens does: the file
    input gets them (and fires its change event)."""
    found = page.call(
        "Runtime.evaluate", expression="document.querySelector('[data-testid=file-input]')"
    )
    page.call(
        "DOM.setFileInputFiles",
        files=[str(p) for p in paths],
        objectId=found["result"]["objectId"],
    )


def attachments(page: WebPage) -> list[str]:
    return list(
        page.js(
            "[...document.querySelectorAll('[data-testid=attachment]')].map(a => a.dataset.name)"
        )
    )


def files_shown(page: WebPage, role: str) -> list[list[str]]:
    """Per message of ``role``: its files as ``chip:name`` or ``image:name``."""
    return list(
        page.js(
            f"[...document.querySelectorAll('[data-testid=message][data-role={role}]')].map(m =>"
            " [...m.querySelectorAll('[data-testid=file-chip], [data-testid=file-image]')]"
            ".map(f => (f.dataset.testid === 'file-chip' ? 'chip:' : 'image:') + f.dataset.name))"
        )
    )


def test_a_pdf_attached_with_the_button_reaches_the_model(page: WebPage, tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(PDF)
    assert page.js("document.querySelector('[data-testid=attach]').offsetParent !== null")
    choose_files(page, pdf)
    page.wait(lambda: attachments(page) == ["report.pdf"], "the attachment in the tray")
    chip = "document.querySelector('[data-testid=attachments] [data-testid=file-chip]')"
    assert "application/pdf" in page.js(f"{chip}.textContent")
    page.send("summarise this")
    page.wait(lambda: page.last_text().startswith("You attached"), "the answer")
    page.idle()
    assert page.last_text() == f"You attached report.pdf (application/pdf, {len(PDF)} bytes)."
    assert files_shown(page, "user") == [["chip:report.pdf"]]
    assert attachments(page) == []  # the tray is empty again
    # the chip downloads the file: its link holds the bytes
    link = page.js("document.querySelector('[data-role=user] [data-testid=file-chip]').href")
    assert link.startswith("data:application/pdf;base64,")


def test_files_dropped_and_pasted_are_attached_and_an_image_previewed(page: WebPage) -> None:
    make = (
        "const png = new Uint8Array(" + json.dumps(list(bytes.fromhex(PNG_HEX))) + ");"
        "const csv = new File(['region,total\\nnorth,3\\n'], 'sales.csv', {type: 'text/csv'});"
        "const drop = new DataTransfer(); drop.items.add(csv);"
        "document.querySelector('[data-testid=messages], #messages').dispatchEvent("
        " new DragEvent('drop', {dataTransfer: drop, bubbles: true, cancelable: true}));"
        "const paste = new DataTransfer();"
        "paste.items.add(new File([png], 'screenshot.png', {type: 'image/png'}));"
        "document.querySelector('[data-testid=message-input]').dispatchEvent("
        " new ClipboardEvent('paste', {clipboardData: paste, bubbles: true, cancelable: true}));"
    )
    page.js(f"(() => {{ {make} }})()")
    page.wait(lambda: sorted(attachments(page)) == ["sales.csv", "screenshot.png"], "both attached")
    preview = "document.querySelector('[data-testid=attachments] [data-testid=file-image] img')"
    page.wait(lambda: page.js(f"{preview}.naturalWidth") == 1, "the pasted image's preview")
    page.js("document.querySelectorAll('[data-testid=remove-attachment]')[0].click()")
    assert len(attachments(page)) == 1
    page.js(f"(() => {{ {make.split('const paste')[0]} }})()")  # drop the CSV again
    page.wait(lambda: len(attachments(page)) == 2, "the CSV again")
    page.send("")  # files alone make a message
    page.wait(lambda: page.last_text().startswith("You attached"), "the answer")
    page.idle()
    assert "screenshot.png (image/png, 70 bytes)" in page.last_text()
    assert "sales.csv (text/csv, 21 bytes)" in page.last_text()
    shown = files_shown(page, "user")[-1]
    assert sorted(shown) == ["chip:sales.csv", "image:screenshot.png"]


def test_a_tools_image_shows_in_the_chat_and_the_inspector_and_after_a_reload(
    page: WebPage,
) -> None:
    page.send("draw a chart")
    page.wait(lambda: page.last_text().endswith("Done: Sales for this week:"), "the answer")
    page.idle()
    image = "document.querySelector('[data-role=assistant] [data-testid=file-image]')"
    assert page.js(f"{image}.dataset.name") == "sales.png"
    page.wait(lambda: page.js(f"{image}.querySelector('img').naturalWidth") == 1, "it loaded")
    thumb = "document.querySelector('[data-kind=tool] [data-testid=inspector-image]')"
    page.wait(lambda: page.js(f"{thumb} !== null"), "the inspector's thumbnail")
    page.wait(lambda: page.js(f"{thumb}.naturalWidth") == 1, "the thumbnail loaded")
    page.js("document.querySelector('[data-kind=tool]').click()")
    raw = str(page.js("document.querySelector('[data-testid=raw-events]').textContent"))
    assert '"name": "sales.png"' in raw  # the tool's result, its image block in it
    page.reload()  # from the stored session: the tool's image after its card
    page.wait(lambda: page.js(f"{image} !== null"), "the image after the reload")
    kinds = page.js(
        "[...document.querySelector('[data-role=assistant] .body').children]"
        ".map(c => c.dataset.testid || c.className)"
    )
    assert kinds.index("file-image") == kinds.index("tool-call") + 1


def test_a_file_over_the_body_limit_is_refused_in_the_page(page: WebPage) -> None:
    page.js(
        "(() => { const big = new File([new Uint8Array(11000000)], 'huge.pdf',"
        " {type: 'application/pdf'}); const d = new DataTransfer(); d.items.add(big);"
        " document.getElementById('messages').dispatchEvent(new DragEvent('drop',"
        " {dataTransfer: d, bubbles: true, cancelable: true})); })()"
    )
    page.wait(lambda: "too large" in page.status(), "the refusal")
    assert "huge.pdf (10.5 MB) is too large: this server takes at most 9.5 MB" in page.status()
    assert attachments(page) == []

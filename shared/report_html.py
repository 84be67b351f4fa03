"""Pages of the workflow's HTML report, self-contained: a markdown file (the claims ledger), or an
executed notebook, whose large PNG outputs are re-encoded as smaller JPEGs: the report shows an HTML
page in a frame loaded from a data URL, which chromium refuses above 2 MB.

    python -m shared.report_html IN.md OUT.html
    python -m shared.report_html IN.ipynb OUT.html
"""
from __future__ import annotations

import base64
import html
import io
import sys
from pathlib import Path

import mistune

STYLE = """body{font-family:sans-serif;margin:1.5em;line-height:1.4}
table{border-collapse:collapse;font-size:0.85em;margin:1em 0}
th,td{border:1px solid #ccc;padding:0.25em 0.5em;text-align:left;vertical-align:top}
th{background:#f3f3f3}code{font-size:0.95em}"""


def to_html(text: str, title: str) -> str:
    body = mistune.create_markdown(plugins=["table"])(text)
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head>\n<body>\n{body}</body></html>\n")


LARGE_PNG = 200_000   # base64 characters of an image output above which it is re-encoded
MAX_WIDTH = 1400      # pixels
PAGE_LIMIT = 1_400_000   # characters: base64 in the report's data URL adds a third, under chromium's 2 MB
# (JPEG quality, pixels in all) of the re-encoded images, tried in turn until the page fits
STEPS = ((80, 4_000_000), (70, 2_500_000), (60, 1_500_000), (50, 800_000))


def shrink_images(nb, quality: int, max_pixels: int) -> None:
    """Re-encode every large PNG output of `nb` as a JPEG of at most MAX_WIDTH pixels across and
    `max_pixels` in all (in place)."""
    from PIL import Image

    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            png = data.get("image/png")
            if not png or len(png) < LARGE_PNG:
                continue
            img = Image.open(io.BytesIO(base64.b64decode(png))).convert("RGB")
            scale = min(1.0, MAX_WIDTH / img.width, (max_pixels / (img.width * img.height)) ** 0.5)
            if scale < 1.0:
                img = img.resize((round(img.width * scale), round(img.height * scale)), Image.LANCZOS)
            buf = io.BytesIO()
            img.save(buf, format="JPEG", quality=quality)
            del data["image/png"]
            data["image/jpeg"] = base64.b64encode(buf.getvalue()).decode()


def notebook_html(path: Path) -> str:
    import nbformat
    from nbconvert import HTMLExporter

    for quality, max_pixels in STEPS:
        nb = nbformat.read(path, as_version=4)
        shrink_images(nb, quality, max_pixels)
        body, _ = HTMLExporter().from_notebook_node(nb)
        if len(body) <= PAGE_LIMIT:
            break
    return body


def main(argv: list[str] | None = None) -> None:
    src, out = map(Path, (argv or sys.argv[1:])[:2])
    text = notebook_html(src) if src.suffix == ".ipynb" else to_html(src.read_text(), src.stem)
    out.write_text(text)


if __name__ == "__main__":
    main()

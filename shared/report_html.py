"""A markdown file (the claims ledger) as a self-contained HTML page for the workflow's HTML report.

    python -m shared.report_html IN.md OUT.html
"""
from __future__ import annotations

import html
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


def main(argv: list[str] | None = None) -> None:
    src, out = (argv or sys.argv[1:])[:2]
    Path(out).write_text(to_html(Path(src).read_text(), Path(src).stem))


if __name__ == "__main__":
    main()

"""RESULTS.md is shared by the benchmarks: each rewrites only its own marked section.

Example:
    >>> rewrite_section(Path("bench/RESULTS.md"), "windows", "Window TVFs vs Spark built-ins", table)
"""
from __future__ import annotations

from pathlib import Path


def rewrite_section(path: Path, name: str, title: str, markdown: str) -> None:
    """Replace the text between `<!-- name:begin -->` and `<!-- name:end -->` (appended under `title` if absent)."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin}\n{markdown}\n{end}"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n## {title}\n\n" + block + "\n"
    path.write_text(text)

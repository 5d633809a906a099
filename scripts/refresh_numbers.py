"""After a new run: the measured numbers of a Markdown file rewritten to what their results
files say now (the markers of scripts/doccheck.py), each at the precision it is written with.

    python scripts/refresh_numbers.py FILE.md ...

Only the numbers change: the prose around them is the author's to read again, and
`make test` (tests/test_docs.py) checks every marker after.
"""
from __future__ import annotations

import json
import re
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))   # doccheck, beside this script

from doccheck import LINK, MARKER_TITLE, NUMBER, evaluate, json_value, matches, resolve, shown_number  # noqa: E402


def refresh(path: Path) -> int:
    """After a new run: rewrite each measured number of `path` whose source moved to what the
    source says now, at the precision it is written with; the number of numbers changed.
    Only the numbers: the prose around them is the author's to read again."""
    source, changed = path.resolve(), 0

    def fix(m: re.Match) -> str:
        nonlocal changed
        text, target, title = m.group(1), m.group(2), m.group(3) or ""
        marker = MARKER_TITLE.match(title)
        shown = shown_number(text)
        if not marker or marker.group(1) != "measured" or shown is None:
            return m.group()
        file, _ = resolve(source, target)
        try:
            value = evaluate(marker.group(2), partial(json_value, json.loads(file.read_text(encoding="utf-8"))))
        except (OSError, KeyError, IndexError, TypeError, ValueError, ZeroDivisionError, AttributeError):
            return m.group()                  # marker_problems() names what is wrong with it
        if matches(shown, value):
            return m.group()
        mantissa, _, exponent = shown.lower().partition("e")
        decimals = len(mantissa.partition(".")[2])
        grouped = "," in NUMBER.search(text).group()
        new = f"{value:.{decimals}e}" if exponent else f"{value:{',' if grouped else ''}.{decimals}f}"
        changed += 1
        return m.group().replace(f"[{text}]", "[" + NUMBER.sub(new, text, count=1) + "]", 1)

    text = path.read_text(encoding="utf-8")
    path.write_text(LINK.sub(fix, text), encoding="utf-8")
    return changed


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit("usage: python scripts/refresh_numbers.py FILE.md ...")
    for name in sys.argv[1:]:
        print(f"{name}: {refresh(Path(name))} number(s) refreshed")

"""Two grades.csv of one class, compared: the same bytes, or every cell that differs. With
--performance-aside the performance columns and the totals they enter are left out and
shown side by side instead: a kernel's time depends on the GPU that timed it and its moment,
and so do those points (a cluster's tasks time on their own nodes).

  python -m kernelcourse.grade.compare A.csv B.csv [--performance-aside]

Exit status 0 when they agree (performance aside, if asked), 1 when they do not.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

PERFORMANCE = ": performance"


def _rows(path: Path) -> tuple[list[str], dict[str, dict]]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), {row["student"]: row for row in reader}


def compare(a: Path, b: Path, performance_aside: bool) -> list[str]:
    """What differs, a line each (nothing: they agree)."""
    if a.read_bytes() == b.read_bytes():
        return []
    (columns, first), (other_columns, second) = _rows(a), _rows(b)
    if columns != other_columns or sorted(first) != sorted(second):
        return [f"not the same class: columns {columns} and {other_columns}, "
                f"students only in one: {sorted(set(first) ^ set(second))}"]
    aside = {c for c in columns if c.endswith(PERFORMANCE) or c == "total"} if performance_aside else set()
    return [f"{student}, {column}: {first[student][column]!r} and {second[student][column]!r}"
            for student in sorted(first) for column in columns
            if column not in aside and first[student][column] != second[student][column]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelcourse.grade.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--performance-aside", action="store_true")
    args = parser.parse_args(argv)
    differ = compare(args.a, args.b, args.performance_aside)
    if not differ and args.a.read_bytes() == args.b.read_bytes():
        print(f"{args.a} and {args.b}: the same bytes")
        return 0
    for line in differ:
        print(line)
    if differ:
        return 1
    columns, first = _rows(args.a)
    second = _rows(args.b)[1]
    shown = [c for c in columns if c.endswith(PERFORMANCE) or c == "total"]
    print(f"{args.a} and {args.b}: every cell the same but performance and the total; those side by side:")
    for student in sorted(first):
        cells = [f"{c} {first[student][c]} and {second[student][c]}" for c in shown
                 if first[student][c] != second[student][c]]
        print(f"  {student}: {'; '.join(cells) if cells else 'the same'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

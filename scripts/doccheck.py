"""What the documentation test checks, as functions that return a list of problems.

* Every relative link and image in a Markdown file resolves to a file or folder of the
  repository, and every `#anchor` to a heading (slugged as GitHub does) or an explicit
  `<a id="...">` of the target file.
* README.md links to every module, lab and exercise directly (the course map), labs in
  order and exercises in order.
* Every glossary entry links to where its term is taught.
* Numbers marked as measured or as datasheet figures match their source. The marker is an
  ordinary link whose title names the value, so that it reads as a number in rendered
  Markdown and its source is one click (or one hover) away:

      [5.86 TFLOP/s](../results/ladder-nvidia-h200-4096.json "measured: rows[0].timing.tflops")
      [11.4%](../results/ladder-nvidia-h200-4096.json "measured: rows[0].timing.of_library * 100")
      [67 TFLOP/s](../REFERENCES.md#nvidia-h200 "datasheet: H200.fp32")
      [14](../REFERENCES.md#nvidia-h200 "datasheet: H200.fp32 / H200.hbm")

      [144 KB](../labs/05-triton-gemm/configs.py "arithmetic: 3 * (128 + 256) * 64 * 2 / 1024")

  `measured:` links to a JSON file in results/ (which must name its device) and gives a
  path into it; `datasheet:` links to a REFERENCES.md anchor that names the device and gives
  keys of kernelcourse.roofline.DATASHEET; `arithmetic:` is numbers only, and links to
  where they come from (the code, a section, a results file that is not JSON). Each may
  combine values and numbers with `+`, `-`, `*`, `/` and parentheses. The first number of
  the link text must equal the value rounded to as many decimals as the text shows.
* In student-facing text (README.md, GLOSSARY.md, modules/, labs/, exercises/, solutions/),
  every number with a unit in prose (a rate, a bandwidth, a time, a size in bytes, a
  percentage) carries such a marker.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from kernelcourse.roofline import DATASHEET

SKIP_DIRS = {".git", ".venv", "venv", "build", ".pytest_cache", "node_modules", "__pycache__",
             ".ipynb_checkpoints"}

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
COMMENT = re.compile(r"<!--.*?-->", re.S)
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"([^\"]*)\")?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]+)\"", re.I)
HTML_ID = re.compile(r"<[a-z][^>]*?\b(?:id|name)=\"([^\"]+)\"", re.I)
ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
MARKER_TITLE = re.compile(r"^(measured|datasheet|arithmetic):\s*(.+)$")
# Rates, bandwidths, times, sizes and percentages: the figures student-facing text may quote
# only with a marker.
UNITS = ("TFLOP/s", "GFLOP/s", "TB/s", "GB/s", "ms", "µs", "ns", "s",
         "KB", "KiB", "MB", "MiB", "GB", "GiB")
UNIT_FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?\s*(?:%|(?:" + "|".join(map(re.escape, UNITS))
                         + r")(?![\w/]))")
# The files a student reads: the course map, the glossary, and what the course folders hold.
STUDENT_FACING = ("README.md", "GLOSSARY.md")
STUDENT_FOLDERS = ("modules", "labs", "exercises", "solutions")


@dataclass(frozen=True)
class Link:
    line: int
    text: str
    target: str
    title: str | None


def markdown_files(repo: Path) -> list[Path]:
    """Every *.md of the repository, outside virtual environments, builds and caches."""
    found = []
    for path in sorted(repo.rglob("*.md")):
        parts = path.relative_to(repo).parts
        if not any(p in SKIP_DIRS or p.endswith(".egg-info") for p in parts[:-1]):
            found.append(path)
    return found


def student_facing_files(repo: Path) -> list[Path]:
    """The Markdown files a student reads: README.md, GLOSSARY.md and every *.md under
    modules/, labs/, exercises/ and solutions/."""
    repo = repo.resolve()
    return [path for path in markdown_files(repo)
            if str(path.relative_to(repo)) in STUDENT_FACING
            or path.relative_to(repo).parts[0] in STUDENT_FOLDERS]


def prose_lines(text: str) -> list[str]:
    """The lines of a Markdown text with fenced code and comments blanked out, so that
    line numbers still match the file."""
    text = COMMENT.sub(lambda m: "\n" * m.group().count("\n"), text)
    lines, fence = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            lines.append("")
        elif fence is not None:
            if line.strip().startswith(fence) and line.strip().strip(fence[0]) == "":
                fence = None
            lines.append("")
        else:
            lines.append(line)
    return lines


def without_code_spans(line: str) -> str:
    return CODE_SPAN.sub(lambda m: " " * len(m.group()), line)


def links(text: str) -> list[Link]:
    found = []
    for number, line in enumerate(prose_lines(text), 1):
        line = without_code_spans(line)
        for m in LINK.finditer(line):
            found.append(Link(number, m.group(1), m.group(2), m.group(3)))
        for m in HTML_LINK.finditer(line):
            found.append(Link(number, "", m.group(1), None))
        m = REF_DEF.match(line)
        if m:
            found.append(Link(number, "", m.group(1), None))
    return found


# ----------------------------------------------------------------------------- anchors

def heading_text(raw: str) -> str:
    """The text GitHub renders for a heading's Markdown: links and images as their text,
    code spans as their content, no emphasis markers, no HTML tags."""
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", raw)
    text = CODE_SPAN.sub(lambda m: m.group(2), text)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"(?<!\w)_(.+?)_(?!\w)", r"\1", text)
    return text.replace("*", "")


def slug(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped (letters, digits, `_`, `-`
    and spaces stay), each space a hyphen."""
    text = heading_text(heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a file offers: its headings' slugs (with GitHub's -1, -2 suffixes for
    repeats) and the ids of its HTML elements."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    lines = prose_lines(text)
    headings = []
    for i, line in enumerate(lines):
        m = ATX.match(line)
        if m:
            headings.append(m.group(2))
        elif SETEXT.match(line) and i > 0 and lines[i - 1].strip() and not ATX.match(lines[i - 1]) \
                and not lines[i - 1].lstrip().startswith(("-", "*", "|", ">")):
            headings.append(lines[i - 1].strip())
    for heading in headings:
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    for line in lines:
        found.update(HTML_ID.findall(line))
    return found


# ----------------------------------------------------------------------------- links

def is_external(target: str) -> bool:
    return bool(re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I))


def resolve(source: Path, target: str) -> tuple[Path | None, str]:
    """(the file or folder a relative link points to, its anchor). The path is None for a
    link to this same file."""
    path, _, anchor = target.partition("#")
    if not path:
        return None, anchor
    return (source.parent / path).resolve(), anchor


def link_problems(repo: Path) -> list[str]:
    repo = repo.resolve()
    problems = []
    cache: dict[Path, set[str]] = {}

    def anchors_of(path: Path) -> set[str]:
        if path not in cache:
            cache[path] = anchors(path.read_text(encoding="utf-8"))
        return cache[path]

    for source in markdown_files(repo):
        source = source.resolve()
        where = source.relative_to(repo)
        for link in links(source.read_text(encoding="utf-8")):
            if not link.target or is_external(link.target):
                continue
            if link.target.startswith("/"):
                problems.append(f"{where}:{link.line}: {link.target}: an absolute path; "
                                "links must be relative to the file")
                continue
            path, anchor = resolve(source, link.target)
            target = path or source
            if path is not None:
                if repo not in path.parents and path != repo:
                    problems.append(f"{where}:{link.line}: {link.target}: outside the repository")
                    continue
                if not path.exists():
                    problems.append(f"{where}:{link.line}: {link.target}: no such file or folder")
                    continue
            if anchor and target.suffix == ".md" and anchor not in anchors_of(target):
                problems.append(f"{where}:{link.line}: {link.target}: no heading or id "
                                f"'#{anchor}' in {target.relative_to(repo)}")
    return problems


# ----------------------------------------------------------------------------- course map

def course_map_problems(repo: Path) -> list[str]:
    """README.md must link, directly, to each module and to each lab and exercise folder
    (the folder itself or a file in it), the labs in order and the exercises in order."""
    repo = repo.resolve()
    readme = repo / "README.md"
    targets = [resolve(readme, link.target)[0]
               for link in links(readme.read_text(encoding="utf-8"))
               if link.target and not is_external(link.target)]
    targets = [t for t in targets if t is not None]

    def first_link(place: Path) -> int | None:
        return next((i for i, t in enumerate(targets) if t == place or place in t.parents), None)

    def folders(parent: str) -> list[Path]:
        return sorted(p for p in (repo / parent).glob("*")
                      if p.is_dir() and not p.name.startswith(("_", ".")))

    problems = []
    for kind, places in (("module", sorted((repo / "modules").glob("*.md"))),
                         ("lab", folders("labs")), ("exercise", folders("exercises"))):
        order = []
        for place in places:
            index = first_link(place)
            if index is None:
                problems.append(f"README.md does not link to {kind} {place.relative_to(repo)}")
            else:
                order.append((index, place.name))
        names = [name for _, name in sorted(order)]
        if names != sorted(names):
            problems.append(f"README.md lists the {kind}s out of order: {', '.join(names)}")
    return problems


# ----------------------------------------------------------------------------- glossary

def glossary_entries(text: str) -> list[list[str]]:
    """[term, the whole entry] for each top-level `- **Term**: ...` item."""
    entries, current = [], None
    for line in text.split("\n"):
        m = re.match(r"^[-*] \*\*(.+?)\*\*", line)
        if m:
            current = [m.group(1), line]
            entries.append(current)
        elif current is not None and line.startswith((" ", "\t")) and line.strip():
            current[1] += "\n" + line
        else:
            current = None
    return entries


def glossary_problems(path: Path) -> list[str]:
    entries = glossary_entries(path.read_text(encoding="utf-8"))
    if not entries:
        return [f"{path.name}: no entries of the form '- **Term**: ...'"]
    return [f"{path.name}: '{term}' links nowhere (say where it is taught)"
            for term, body in entries
            if not any(not is_external(link.target) for link in links(body))]


# ----------------------------------------------------------------------------- marked numbers

def shown_number(text: str) -> str | None:
    m = NUMBER.search(text)
    return m.group().replace(",", "") if m else None


def matches(shown: str, value: float) -> bool:
    """Is `shown` what `value` rounds to, at the precision `shown` is written with?"""
    mantissa, _, exponent = shown.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    if exponent:
        return float(f"{value:.{decimals}e}") == float(shown)
    return f"{value:.{decimals}f}" == f"{float(shown):.{decimals}f}"


def json_value(data, path: str):
    """data at a path such as rows[0].timing.tflops; KeyError/IndexError if there is none."""
    value = data
    for key, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        value = value[int(index)] if index else value[key]
    return value


EXPRESSION_TOKEN = re.compile(r"\s*(?:([()+\-*/])|([^\s()+\-*/]+))")


def evaluate(expression: str, operand) -> float:
    """`a * (b + c) / d` with the usual precedence; each operand a number or whatever
    `operand(name)` gives. ValueError for an expression that does not parse."""
    tokens = [op or word for op, word in EXPRESSION_TOKEN.findall(expression.strip())]
    position = 0

    def peek():
        return tokens[position] if position < len(tokens) else None

    def take():
        nonlocal position
        position += 1
        return tokens[position - 1]

    def atom() -> float:
        token = peek()
        if token is None or token in "+*/)":
            raise ValueError(f"an operand is missing in '{expression}'")
        take()
        if token == "-":
            return -atom()
        if token == "(":
            inner = total()
            if peek() != ")":
                raise ValueError(f"a ')' is missing in '{expression}'")
            take()
            return inner
        return float(token) if NUMBER.fullmatch(token) else float(operand(token))

    def product() -> float:
        result = atom()
        while peek() in ("*", "/"):
            result = result * atom() if take() == "*" else result / atom()
        return result

    def total() -> float:
        result = product()
        while peek() in ("+", "-"):
            result = result + product() if take() == "+" else result - product()
        return result

    result = total()
    if peek() is not None:
        raise ValueError(f"'{peek()}' is left over in '{expression}'")
    return result


def no_names(name: str) -> float:
    raise ValueError(f"an arithmetic marker holds numbers only, not '{name}'")


def datasheet_value(name: str) -> float:
    device, _, key = name.partition(".")
    return DATASHEET[device][key]


def marker_problems(repo: Path) -> list[str]:
    repo = repo.resolve()
    problems = []
    for source in markdown_files(repo):
        source = source.resolve()
        where = source.relative_to(repo)
        for link in links(source.read_text(encoding="utf-8")):
            m = MARKER_TITLE.match(link.title or "")
            if not m:
                continue
            kind, expression = m.groups()
            label = f"{where}:{link.line}: [{link.text}]"
            shown = shown_number(link.text)
            if shown is None:
                problems.append(f"{label}: the link text shows no number")
                continue
            path, anchor = resolve(source, link.target)
            if kind == "measured":
                if path is None or path.parent != repo / "results" or path.suffix != ".json" \
                        or not path.exists():
                    problems.append(f"{label}: a measured number must link to a JSON file in "
                                    f"results/, not {link.target}")
                    continue
                data = json.loads(path.read_text(encoding="utf-8"))
                try:
                    json_value(data, "environment.device.name")
                except (KeyError, IndexError, TypeError):
                    problems.append(f"{label}: {path.name} names no device "
                                    "(environment.device.name)")
                    continue
                operand = partial(json_value, data)
            elif kind == "arithmetic":
                if not link.target or is_external(link.target):
                    problems.append(f"{label}: an arithmetic marker must link to where its "
                                    "numbers come from")
                    continue
                operand = no_names
            else:
                devices = {name.partition(".")[0] for name in re.findall(r"[A-Za-z]\w*\.\w+", expression)}
                if path != repo / "REFERENCES.md" or not anchor \
                        or not all(d.lower() in anchor.lower() for d in devices):
                    problems.append(f"{label}: a datasheet figure must link to the REFERENCES.md "
                                    f"anchor of its device ({', '.join(sorted(devices))}), "
                                    f"not {link.target}")
                    continue
                operand = datasheet_value
            try:
                value = evaluate(expression, operand)
            except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as exc:
                problems.append(f"{label}: '{expression}' has no value ({type(exc).__name__}: {exc})")
                continue
            if not matches(shown, value):
                problems.append(f"{label}: shows {shown}, but {expression} is {value!r}")
    return problems


def unmarked_figures(path: Path, root: Path | None = None) -> list[str]:
    """Rates, bandwidths, times, sizes and percentages in prose that carry no marker. An
    image's alt text is not read: it cannot hold a link, and it describes a figure that
    code draws from the results."""
    problems = []
    for number, line in enumerate(prose_lines(path.read_text(encoding="utf-8")), 1):
        line = without_code_spans(line)
        line = LINK.sub(lambda m: " " if m.group().startswith("!") else m.group(), line)
        line = LINK.sub(lambda m: " " if MARKER_TITLE.match(m.group(3) or "") else m.group(), line)
        for m in UNIT_FIGURE.finditer(line):
            where = path.resolve().relative_to(root.resolve()) if root else path.name
            problems.append(f"{where}:{number}: '{m.group()}' is not marked as measured, "
                            "as a datasheet figure or as arithmetic")
    return problems

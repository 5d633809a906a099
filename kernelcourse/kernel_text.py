"""A kernel file as the diagnosis reads it, never running it: its lines, numbered from 1, and
where its loops, branches, tiles, accesses and store are (KernelText), so that "look at"
can list the lines a cause points to; and where a crash's message places an access outside
an array (a backend that places one, the cpu backend or the Triton interpreter's bounds
check, writes "read past the end of B (...) at f.cu:45")."""
from __future__ import annotations

import ast
import bisect
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .diagnosis import Evidence
    from .verify import ShapeResult

OUTSIDE = re.compile(r"\b(?P<access>read|write) (?:past the end|before the start) of (?P<array>\w+)")
# A crash's place in the kernel's file: "... at tiled.cu:58" (a fault, as the backends name it),
# or "... was stopped: pipeline.cu:161: ..." (a rule of the cpu backend's emulation broken there).
PLACE = re.compile(r"(?: at |was stopped: )(?P<file>[^\s,()]+):(?P<line>\d+)\b")
# The other lines of the file a crash names: a deadlock's "1 thread waits on line 125 ... the
# mbarrier initialised on line 108", an emulation rule's "the TMA copy of line 127".
NAMED_LINE = re.compile(r"\bline (\d+)\b")
EMULATION_RULE = re.compile(r"was stopped: [^\s,()]+:\d+: ")


def access_outside(r: ShapeResult):
    """The match naming an access outside an array in r's crash, or None."""
    return OUTSIDE.search(r.crash or "")


# ------------------------------------------------------------------- the kernel's lines
# "look at" reads the kernel's file for the lines a cause points to. Each selector below
# gives (line number, note) pairs; the table names which selectors each cause uses.

_C_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|^[ \t]*#[^\n]*', re.S | re.M)
_C_HEADER = re.compile(r"\b(for|while|if|else|do)\b")
_C_STEP = re.compile(r"\b(for|while|if|switch)\b\s*\(")
_BOUNDS = r"(?:__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)\s*)?"     # before or after `void`


class KernelText:
    """A kernel file as "look at" reads it: its lines, numbered from 1, and where its loops,
    branches, tiles, accesses and store are. A C kernel (.cu) is read with regular expressions
    over its code (comments, strings and preprocessor lines blanked, line breaks kept), a
    Triton file (.py) with Python's own parser. Reading never runs it."""

    def __init__(self, path: Path, text: str):
        self.path, self.name, self.text, self.lines = path, path.name, text, text.splitlines()
        self.triton = path.suffix == ".py"
        if self.triton:
            self.tree = ast.parse(text)
            self._index_python()
        else:
            self.code = _C_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
            self._index_c()

    @classmethod
    def read(cls, path) -> "KernelText | None":
        """The file at `path`, or None where it cannot be read or parsed."""
        path = Path(path)
        try:
            return cls(path, path.read_text(errors="replace"))
        except (OSError, SyntaxError, ValueError):
            return None

    def signature(self) -> object:
        """The code alone: comments, docstrings and spacing left out (what a stub shares
        with a file whose comments alone changed)."""
        if self.triton:
            tree = ast.parse(self.text)
            for node in ast.walk(tree):
                body = getattr(node, "body", None)
                if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                        and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
                    body[0] = ast.Pass()
            return ast.dump(tree)
        return tuple(" ".join(line.split()) for line in self.code.splitlines() if line.strip())

    # -- C: regions (the bodies of for, while, do, if, else), found by their statement's end
    def _index_c(self) -> None:
        code = self.code
        self.starts = [0] + [m.end() for m in re.finditer("\n", code)]
        self.regions = []                   # (kind, condition, header's offset, body start, end)
        for m in _C_HEADER.finditer(code):
            kind, start = m.group(1), m.end()
            condition = ""
            if kind in ("for", "while", "if"):
                opening = _skip_space(code, start)
                if opening >= len(code) or code[opening] != "(":
                    continue
                closing = _matching(code, opening)
                condition, start = code[opening + 1:closing], closing + 1
                if kind == "while" and code[_skip_space(code, start):][:1] == ";":
                    continue                # a do-while's tail: its body is the do's
            elif kind == "else":
                before = [r for r in self.regions if r[0] == "if" and not code[r[4]:m.start()].strip()]
                condition = f"else of ({before[-1][1].strip()})" if before else "else"
            end = _statement_end(code, start)
            if kind == "do" and (tail := re.compile(r"\s*while\s*\(").match(code, end)):
                condition = code[tail.end():_matching(code, tail.end() - 1)]     # its test, after the body
            self.regions.append((kind, " ".join(condition.split()), m.start(), start, end))
        kernel = re.search(rf"__global__\s+{_BOUNDS}void\s+{_BOUNDS}\w+\s*\(([^)]*)\)", code)
        params = [p for p in (kernel.group(1).split(",") if kernel else []) if p.strip()]
        pointers = [p for p in params if "*" in p]
        self.pointers = [re.findall(r"\w+", p)[-1] for p in pointers]
        self.outputs = [re.findall(r"\w+", p)[-1] for p in pointers if not re.search(r"\bconst\b", p)]
        self.sizes = {re.findall(r"\w+", p)[-1] for p in params if "*" not in p}      # M, N, K
        self.tiles = re.findall(r"__shared__\s+(?:[\w:]+\s+)+(\w+)\s*\[", code)

    def _line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)

    def _code_line(self, number: int) -> str:
        return self.code[self.starts[number - 1]:self.starts[number] - 1 if number < len(self.starts) else None]

    def _matching(self, pattern: str) -> list[int]:
        return [n for n in range(1, len(self.starts) + 1) if re.search(pattern, self._code_line(n))]

    def _enclosing(self, number: int, kinds=("for", "while", "do", "if", "else")) -> list[tuple]:
        line = self._code_line(number)
        offset = self.starts[number - 1] + len(line) - len(line.lstrip())
        return [r for r in self.regions if r[0] in kinds and r[3] <= offset < r[4]]

    def _in_loop(self, number: int) -> bool:
        return bool(self._enclosing(number, ("for", "while", "do")))

    def _writes(self, names) -> list[int]:
        alternatives = "|".join(map(re.escape, names)) or r"(?!)"
        return self._matching(rf"\b(?:{alternatives})\s*(?:\[[^\]]*\]\s*)+[-+*/]?=(?!=)")

    # -- Triton: loops and calls by Python's parser
    def _index_python(self) -> None:
        self.nodes = []                                  # (node, whether inside a loop's body)

        def walk(node, looping):
            for child in ast.iter_child_nodes(node):
                inside = looping or isinstance(node, (ast.For, ast.While)) and child in node.body
                self.nodes.append((child, inside))
                walk(child, inside)
        walk(self.tree, False)

    def _spans(self, *names) -> list:
        """Every line of each tl.<name>(...) call, a call over several lines included."""
        return [(line, "") for n in self._calls(*names) for line in range(n.lineno, n.end_lineno + 1)]

    def _calls(self, *names) -> list:
        return [n for n, _ in self.nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in names and isinstance(n.func.value, ast.Name) and n.func.value.id == "tl"]

    def _assigning(self, name: str) -> list:
        """(statement, inside a loop) for every assignment to `name`."""
        found = []
        for node, inside in self.nodes:
            targets = (node.targets if isinstance(node, ast.Assign) else
                       [node.target] if isinstance(node, ast.AugAssign) else [])
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found.append((node, inside))
        return found

    def _assignments(self, name: str) -> list[int]:
        return [node.lineno for node, _ in self._assigning(name)]

    # -- the selectors
    def loops(self, f) -> list:
        """Every loop header: for, while, do."""
        if self.triton:
            return [(n.lineno, "") for n, _ in self.nodes if isinstance(n, (ast.For, ast.While))]
        return [(n, "") for n in self._matching(r"\b(?:for|while)\s*\(|\bdo\b")]

    def advances(self, f) -> list:
        """What a loop steps inside its body: in C, the loop's own variables assigned there
        (a while loop's k0 += TILE); in Triton, the augmented assignments (the pointers)."""
        if self.triton:
            return [(n.lineno, "") for n, inside in self.nodes if isinstance(n, ast.AugAssign) and inside]
        found = []
        for kind, condition, _, start, end in self.regions:
            if kind not in ("for", "while", "do"):
                continue
            parts = condition.split(";")
            test = parts[1] if kind == "for" and len(parts) == 3 else parts[0]     # for's middle part
            for name in set(re.findall(r"\b[A-Za-z_]\w*\b", test)):
                pattern = rf"\b{name}\s*[-+*/]?=(?!=)|\+\+\s*{name}\b|\b{name}\s*\+\+"
                body = self.code[start:end]
                found += [(self._line_of(start + m.start()), "") for m in re.finditer(pattern, body)]
        return found

    def barriers(self, f) -> list:
        return [] if self.triton else [(n, "") for n in self._matching(r"\b__syncthreads\s*\(")]

    def waits(self, f) -> list:
        """The waits on mbarriers (hopper.h's kc_mbarrier_wait): a phase that never completes
        hangs the threads waiting for it."""
        return [] if self.triton else [(n, "") for n in self._matching(r"\bkc_mbarrier_wait\s*\(")]

    def branches(self, f) -> list:
        """The branches around the barriers, and the early returns."""
        if self.triton:
            return []
        found = []
        for number in self._matching(r"\breturn\b") + [n for n, _ in self.barriers(f)]:
            found += [(self._line_of(r[2]), "") for r in self._enclosing(number, ("if", "else"))]
        return found + [(n, "") for n in self._matching(r"\breturn\b")]

    def store(self, f) -> list:
        """The store to C and its guard (in Triton: the tl.store and its mask)."""
        if self.triton:
            return self._spans("store")
        found = []
        for number in self._writes(self.outputs):
            found.append((number, ""))
            found += [(self._line_of(r[2]), "") for r in self._enclosing(number, ("if", "else"))]
        return found

    def tile_writes(self, f) -> list:
        """Every write to a shared tile, in every branch (in Triton: the tl.loads)."""
        if self.triton:
            return self._spans("load")
        return [(n, "") for n in self._writes(self.tiles)]

    def accesses(self, f) -> list:
        """Every access to A, B or C, with its index (in Triton: where the pointers are
        built and advanced, and the loads, the dot and the store)."""
        if self.triton:
            found = self._spans("load", "store", "dot")
            for call in self._calls("load", "store"):
                if call.args and isinstance(call.args[0], ast.Name):
                    found += [(line, "") for line in self._assignments(call.args[0].id)]
            return found
        alternatives = "|".join(map(re.escape, self.pointers)) or r"(?!)"
        return [(n, "") for n in self._matching(rf"\b(?:{alternatives})\s*\[")]

    def products(self, f) -> list:
        """The inner product: the lines that read the tiles (in Triton: the tl.dot)."""
        if self.triton:
            return [(n.lineno, "") for n in self._calls("dot")]
        alternatives = "|".join(map(re.escape, self.tiles)) or r"(?!)"
        skip = set(self._writes(self.tiles)) | set(self._matching(r"\b__shared__\b"))
        return [(n, "") for n in self._matching(rf"\b(?:{alternatives})\s*\[") if n not in skip]

    def accumulator(self, f) -> list:
        """Every declaration of, and assignment to, what the store writes, marked where it is
        inside a loop (in Triton: the tl.dot too, marked where its result is not kept)."""
        if self.triton:
            stored = {a.id for call in self._calls("store") for a in call.args[1:2] if isinstance(a, ast.Name)}
            found = [(node.lineno, "set anew inside a loop" if inside and not _uses(node.value, name) else "")
                     for name in stored for node, inside in self._assigning(name)]
            kept = {line for line, _ in found}
            lost = f"its result is not kept in {' or '.join(sorted(stored))}" if stored else ""
            return found + [(n.lineno, "" if n.lineno in kept else lost) for n in self._calls("dot")]
        stored = set()
        for number in self._writes(self.outputs):
            value = self._code_line(number).split("=", 1)[1]
            # the names it stores, not a function-style cast around them (float(acc))
            stored |= set(re.findall(r"\b([A-Za-z_]\w*)\b(?!\s*\()", value)) - set(self.pointers)
        found = []
        for name in stored:
            declared = rf"\b(?!return\b|else\b)[A-Za-z_][\w:]*\s+{name}\s*(?:=|;|\[|,)"
            updated = rf"\b{name}\s*[-+*/]=|\b{name}\s*=[^=;]*\b{name}\b"
            set_anew = rf"\b{name}\s*=(?!=)"
            for n in self._matching(rf"{declared}|{set_anew}|{updated}"):
                line = self._code_line(n)
                anew = self._in_loop(n) and not re.search(updated, line)
                note = ("declared inside a loop" if re.search(declared, line) else "set anew inside a loop")
                found.append((n, note if anew else ""))
        return found

    def grid(self, f) -> list:
        """Where a block (a program) finds its tile: blockIdx (program_id), and the grid."""
        if self.triton:
            return ([(n.lineno, "") for n in self._calls("program_id")]
                    + [(line, "") for line in self._assignments("grid")])
        return [(n, "") for n in self._matching(r"\bblockIdx\b")] + self.store(f)

    def precision(self, f) -> list:
        """The accumulator's type and the inner product (in Triton: tl.zeros and tl.dot)."""
        if self.triton:
            return [(n.lineno, "") for n in self._calls("zeros", "dot")]
        return self.accumulator(f) + self.products(f)

    def fault(self, f) -> list:
        """The line a crash names, and what builds the index read there; for a deadlock, the
        waits it names and the barriers they wait on."""
        place = self._fault_line(f)
        crash = next((r.crash for r in getattr(f, "failed", [f]) if r.crash), "") or ""
        named = [(int(n), "") for n in NAMED_LINE.findall(crash) if 1 <= int(n) <= len(self.lines)]
        # a rule of the mbarriers broken: every wait on them and every arrival too, where the
        # mistake usually is (a parity, a guard, a release made too early or never)
        protocol = ([(n, "") for n in self._matching(r"\bkc_mbarrier_(?:wait|arrive\w*)\s*\(")]
                    if "barrier" in crash and not self.triton else [])
        if place is None:
            return list(dict.fromkeys(named + protocol)) if "deadlock" in crash and named else self.accesses(f)
        number, array = place
        found = [(number, "")]
        if EMULATION_RULE.search(crash) and not array:   # a rule broken there, not an access
            return list(dict.fromkeys(found + named + protocol))
        if not self.triton:     # its guards; for an index past an array or a misaligned access,
            if array:           # the loops setting the index and the arrays' declarations too
                return found + [(self._line_of(r[2]), "") for r in self._enclosing(number, ("if", "else"))]
            kinds = ("if", "else", "for", "while")
            return (found + [(self._line_of(r[2]), "") for r in self._enclosing(number, kinds)]
                    + [(n, "") for n in self._matching(r"\b__shared__\b")])
        for call in self._calls("load", "store"):
            if call.lineno <= number <= call.end_lineno and call.args and isinstance(call.args[0], ast.Name):
                found += [(line, "") for line in self._assignments(call.args[0].id)]
        return found

    # -- what a crash's line says about its guard
    def _fault_line(self, f: "Evidence | ShapeResult") -> tuple[int, str] | None:
        r = next((r for r in f.failed if PLACE.search(r.crash or "")), None) if hasattr(f, "failed") else f
        place = PLACE.search(r.crash or "") if r else None
        if not place or Path(place["file"]).name != self.name:
            return None
        number, outside = int(place["line"]), access_outside(r)
        return (number, outside["array"] if outside else "") if 1 <= number <= len(self.lines) else None

    def guard_verdict(self, r: ShapeResult) -> str | None:
        """Whether the access a crash names has its guard (then its index is what is wrong)
        or has none, in one sentence; None where the crash names no line of this file."""
        place = self._fault_line(r)
        if place is None or access_outside(r) is None:
            return None
        number, array = place
        access = access_outside(r)["access"]
        at = f"{self.name}:{number}"
        if self.triton:
            call = next((c for c in self._calls("load", "store") if c.lineno <= number <= c.end_lineno), None)
            if call is None:
                return None
            mask = next((k for k in call.keywords if k.arg == "mask"), None)
            pointer = ast.get_source_segment(self.text, call.args[0]) if call.args else array
            if mask is None:
                return (f"{at} is a tl.{call.func.attr} without a mask: its guard is missing, so "
                        f"every lane of {pointer} is accessed, in range or not.")
            return (f"{at} has its mask ({ast.get_source_segment(self.text, mask.value)}), "
                    f"yet {pointer} points outside {array} in a lane it lets through: the guard "
                    "is there, so the pointers are wrong under it (where they are built, or how "
                    "far they advance).")
        line = self._code_line(number)
        found = re.search(rf"\b{re.escape(array)}\s*\[", line)
        if found is None:
            return None
        index = f"{array}[{line[found.end():_matching(line, found.end() - 1, '[', ']')]}]"
        guards = [r[1] for r in self._enclosing(number, ("if", "else"))]
        ternary = re.search(r"\(([^;?]*)\)\s*\?[^;:]*$", line[:found.start()])
        same_line = re.match(r"\s*(?:else\s+)?if\s*\((.*)\)", line[:found.start()])
        guards += [m.group(1).strip() for m in (ternary, same_line) if m]
        does = f"{at} {'reads' if access == 'read' else 'writes'} {index}"
        if not guards:
            return (f"{does} with no condition on that line or around it: the guard is missing "
                    "(an access before its test runs for every thread, in range or not).")
        guard = "; ".join(" ".join(g.split()) for g in guards)
        # The index's own variables (not the sizes, the tile, a cast): each needs its test.
        variables = set(re.findall(r"\b[a-z_]\w*\b", index[len(array):])) - self.sizes - {"size_t", "int"}
        untested = sorted(v for v in variables if not re.search(rf"\b{v}\b", guard))
        if untested:
            return (f"{does} under a guard, ({guard}), that does not test {' or '.join(untested)}, "
                    "which the index uses: the guard is missing that part.")
        return (f"{does} under its guard ({guard}): the guard is there, so the index is wrong (a "
                "guard that holds keeps a right index inside the array; A is M x K with row "
                "stride K, B is K x N with row stride N).")


def same_code(path, other) -> bool:
    """Whether two kernel files hold the same code, their comments and spacing aside (a
    stub as shipped, whatever the student wrote in its comments)."""
    mine, theirs = KernelText.read(path), KernelText.read(other)
    return bool(mine and theirs) and mine.signature() == theirs.signature()


def _uses(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _skip_space(code: str, position: int) -> int:
    while position < len(code) and code[position].isspace():
        position += 1
    return position


def _matching(code: str, opening: int, left: str = "(", right: str = ")") -> int:
    """The offset of the bracket that closes the one at `opening` (the end, if none)."""
    depth = 0
    for i in range(opening, len(code)):
        depth += (code[i] == left) - (code[i] == right)
        if depth == 0:
            return i
    return len(code)


def _statement_end(code: str, position: int) -> int:
    """Where the C statement that starts at `position` ends: a block's closing brace, a
    header's body (an if's else too), or the `;` outside any bracket."""
    position = _skip_space(code, position)
    if position >= len(code):
        return position
    if code[position] == "{":
        return _matching(code, position, "{", "}") + 1
    header = _C_STEP.match(code, position)
    if header:
        end = _statement_end(code, _matching(code, header.end() - 1) + 1)
        otherwise = re.compile(r"\s*else\b").match(code, end) if header.group(1) == "if" else None
        return _statement_end(code, otherwise.end()) if otherwise else end
    if re.compile(r"do\b").match(code, position):
        end = _statement_end(code, position + 2)
        tail = re.compile(r"\s*while\s*\(").match(code, end)
        return code.find(";", _matching(code, tail.end() - 1)) + 1 if tail else end
    depth = 0
    for i in range(position, len(code)):
        depth += (code[i] in "([{") - (code[i] in ")]}")
        if depth < 0:
            return i                        # the end of the block the statement is in
        if code[i] == ";" and depth == 0:
            return i + 1
    return len(code)

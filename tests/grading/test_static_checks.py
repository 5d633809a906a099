"""The grader's static checks (kernelcourse/grade/static/), the honest defence against a
library doing the work: the Triton file held to its allowlist and the C file to its source
and symbol rules, refused before anything runs; the course's own files let through; and,
with the static check off, what the later defences catch alone. (test_python_layers.py and
test_c_layers.py try each later layer alone, cheat by cheat.)
"""
import os
import re

import pytest

from grading.submissions import CHEATS, REPO, SEED, make
from kernelcourse.grade import runner, static
from kernelcourse.grade.__main__ import make_run


REFUSED_TRITON = {
    "import numpy": "imports numpy",
    "import torch\nC = torch.mm(A, B)": "uses torch.mm",
    "from torch import matmul": "imports torch.matmul",
    "import torch\ntorch.os.system('x')": "uses torch.os",
    "import importlib": "imports importlib",
    "f = eval('1')": "uses eval",
    "x = getattr(A, 'mat' + 'mul')": "uses getattr",
    "x = A.__class__": "uses .__class__",
    "def gemm(A, B, C, M, N, K):\n    D = A @ B": "multiplies with @",
    "def gemm(A, B, C, M, N, K):\n    C[:] = 0": "indexes C[:]",
    "class Fake:\n    pass": "defines a class",
    "def gemm(A, B, C, M, N, K):\n    global SEEN": "uses global",
    "import torch\ndef gemm(A, B, C, M, N, K):\n    C.copy_(torch.zeros(1))": "uses C.copy_",
    "import math\nimport triton\n@triton.jit\ndef k(x):\n    y = math.sqrt(2.0)": "uses math inside a @triton.jit",
    # modules reached through allowed names, and names from outside the file
    "import triton.language as tl\nx = tl.core": "uses tl.core",
    "import triton.language as tl\nx = tl.float32.primitive_bitwidth": "an attribute of tl.float32",
    "import torch\nx = torch": "uses the module torch as a value",
    "import triton\n@triton.jit\ndef k(x):\n    inspect.stack()": "uses inspect, which this file does not define",
    "def gemm(A, B, C, M, N, K):\n    np.matmul(A, B, out=C)": "uses np, which this file does not define",
    "import torch\ntorch = 1": "rebinds torch",
    "range = print": "rebinds range",
    # code that runs when a def runs: defaults, decorators and their arguments, annotations
    "import triton\n@triton.jit\ndef k(x, y=print('host')):\n    pass": "gives a default value print('host'), which is not a constant",
    "g = lambda meta, x=print('host'): x": "gives a lambda a default value",
    "def hook(f):\n    return f\n@hook\ndef gemm(A, B, C, M, N, K):\n    pass": "decorates gemm with @hook",
    "import triton\n@triton.jit(launch_metadata=print)\ndef k(x):\n    pass": "decorates k with @triton.jit(launch_metadata=print)",
    "import triton\n@triton.heuristics({'B': lambda args: 1})\n@triton.jit\ndef k(x):\n    pass": "decorates k with @triton.heuristics",
    "import triton\nc = triton.Config({'B': 1}, pre_hook=print)": "passes pre_hook= to triton.Config",
    "import triton\n@triton.autotune(configs=[], key=[], prune_configs_by={})\n@triton.jit\ndef k(x):\n    pass": "passes prune_configs_by= to triton.autotune",
    "import triton\n@triton.autotune(configs=[], key=[print('host')])\n@triton.jit\ndef k(x):\n    pass": "key= that is not a list of argument names",
    "import torch\ndef f(x: torch.matmul):\n    pass": "annotates with torch.matmul",
    # strings evaluated later, and typing
    "def f(x: 'torch.matmul'):\n    pass": "annotates with the string 'torch.matmul'",
    "from __future__ import annotations": "imports from __future__",
    "import typing": "imports typing: its namespace holds sys",
    "from typing import sys": "imports from typing",
    # syntax a kernel file does not need
    "x = [(y := 1) for _ in range(2)]": "uses :=",
    "match 1:\n    case _:\n        pass": "uses match",
    "try:\n    pass\nexcept Exception:\n    pass": "catches exceptions",
    "def f():\n    yield 1": "makes a generator",
    "def f():\n    def g():\n        pass": "defines a function inside a function",
    "def f():\n    import torch": "imports inside a function",
    "def __getattr__(name):\n    pass": "defines __getattr__",
    "def f(A):\n    A.shape = 1": "assigns to A.shape",
    # kernels, which the interpreter runs as Python on whatever a constexpr was given
    "import triton\n@triton.jit\ndef k(x):\n    x.copy_(x)": "uses x.copy_ inside a @triton.jit function",
    "import triton\n@triton.jit\ndef k(x):\n    y = x[0]": "indexes x[0] inside a @triton.jit function",
    "import triton\n@triton.jit\ndef k(x):\n    float(x)": "uses float, which this file does not define (inside a @triton.jit",
    "import triton\n@triton.jit\ndef k(x):\n    y = lambda: 1": "defines a lambda inside a @triton.jit function",
    "import triton\n@triton.jit\ndef k(x):\n    y = f'{x:{x}}'": "formats a string (f-string) inside a @triton.jit function",
    "import triton.language as tl\nimport triton\n@triton.jit\ndef k(x):\n    tl.device_print('x', x)": "uses tl.device_print",
    "import triton.language as tl\nimport triton\n@triton.jit\ndef k(x):\n    tl.static_assert(x)": "uses tl.static_assert",
}


@pytest.mark.parametrize("source", REFUSED_TRITON, ids=list(REFUSED_TRITON.values()))
def test_the_triton_static_check_refuses(source):
    with pytest.raises(static.Refused, match=re.escape(REFUSED_TRITON[source])):
        static.check_triton(source, "tiled_triton.py")


def test_the_course_own_triton_files_pass_the_static_check():
    for path in ("solutions/01-tiled-matmul/tiled_triton.py", "exercises/01-tiled-matmul/tiled_triton.py",
                 "labs/02-tiled/tiled_triton.py", "labs/01-naive/naive_triton.py"):
        static.check_triton((REPO / path).read_text(), path)
    for path in ("solutions/01-tiled-matmul/tiled.cu", "exercises/02-ragged-dims/tiled_faulty.cu"):
        static.check_c_source((REPO / path).read_text(), path)


def test_the_c_static_checks_refuse_what_reaches_outside_the_kernel():
    """(test_c_layers.py holds the rest: respellings, the build's checks of the object it
    links, and the launch's.)"""
    for source, said in (('asm volatile("syscall");', "line 2: holds inline assembly"),
                         ("#include <cstdio>", "line 2: includes"),
                         ("#define J(a, b) a##b", "line 2: pastes tokens"),
                         ("__attribute__((constructor)) void f() {}", "line 2: uses an attribute")):
        with pytest.raises(static.Refused, match=said):
            static.check_c_source('#include "portable.h"\n' + source, "tiled.cu")
    static.check_c_source('#include "portable.h"\n// #include <cstdio> in a comment is fine', "tiled.cu")
    static.check_symbols(["expf", "memcpy"], "tiled.cu")
    for symbol in ("system", "fopen", "dlsym", "cblas_sgemm", "syscall"):
        with pytest.raises(static.Refused, match=rf"tiled\.cu calls {symbol} \(line 2\)"):
            static.check_symbols(["expf", symbol], "tiled.cu", f'#include "portable.h"\nint r = {symbol}(0);')


def test_the_static_check_is_the_defence_against_a_library_gemm_and_each_later_defence_holds_alone(tmp_path):
    """With the static check off (as no instructor runs it), torch.matmul would earn full
    marks: the static check is what stops it. A result cached by pointer, which the static
    check also refuses, is caught without it by the second input set in the same buffers."""
    folder = tmp_path / "subs"
    for cheat in ("library_matmul", "cache_by_pointer"):
        make(folder / cheat, {"tiled_triton.py": (CHEATS / "01" / f"{cheat}.py").read_text()})
    os.environ["GRADE_SEED"] = SEED
    run = make_run(REPO / "exercises" / "01-tiled-matmul", tmp_path / "out", test_time_limit=60)
    run.static_checks = False
    try:
        library = runner.Submission(run, "library_matmul", folder / "library_matmul", 0).grade()
        cached = runner.Submission(run, "cache_by_pointer", folder / "cache_by_pointer", 1).grade()
    finally:
        run.close()
    assert sum(o.score for o in library if o.name.startswith("tiled_triton.py")) == 10
    triton = [o for o in cached if o.name.startswith("tiled_triton.py") and o.max_score]
    assert triton and all(o.score == 0 for o in triton), [o.output for o in triton]
    assert all("on the second input set (same buffers, new values" in o.output for o in triton)

"""The layers around a C kernel (exercise 01's tiled.cu), each shown to hold alone.

Each cheat of UNCHECKED (tests/grading/01) went through a door of the grader before these
layers to full marks, its kernel the exercise's unmodified stub or none at all: it forges
the results of both files into the grader's result pipe from a launch, with the C library
declared behind a define only the build passes, or found by hand; it forges them from a
global's initialiser as the library loads; or it includes the course's own kernel through
the harness's include folder, the directive spelled past a search of the text (a line
splice, a digraph). Three layers stand in the way, and the tests take them one at a time:

  * the source rules (kernelcourse/grade/static/c_rules.py), the grader's: the text read as
    the compiler reads it, its respellings refused first, each refusal with its line;
  * the cpu backend's build (kernelcourse/backends/cpu.py), for every build, make check
    too: the headers the preprocessor entered, the kernel's own lines after it (inline
    assembly), and the object the library is linked from (code run at load time, names of
    the launch code's, imports), with exactly the build's flags and defines;
  * the launch (kernelcourse/kernels/cpu_launch.h): a child with no descriptor but 0, 1 and
    2, under a system-call filter.

One folder is graded once with the static check off, as no instructor runs it: every cheat
scores 0 there too, and its results.json names the layer that stopped it; the solution
keeps full marks. The header test of tests/test_grade.py grades the same files with every
check on.
"""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

from grading import submissions
from grading.submissions import header
from kernelcourse.backends.compile_only import CompileError
from kernelcourse.backends.cpu import CpuBackend, KernelFault
from kernelcourse.backends.cpu_build import find_compiler, system_include_dirs
from kernelcourse.grade import static
from kernelcourse.grade.static import c_rules

REPO = submissions.REPO
KERNELS = REPO / "tests" / "kernels"
CHEATS = submissions.CHEATS / "01"
C_FILE = "tiled.cu"
PRELUDE = '#include "portable.h"\n'
KERNEL = 'extern "C" __global__ void k(float* y) { y[threadIdx.x] = 1.0f; }\n'
# Each cheat, and what its results.json says with the static check off: the layer that
# stops it then.
UNCHECKED = {
    "forges_results": "tiled.cu calls system (line 53)",                 # the build: imports
    "forges_results_by_hand": "that a GPU kernel cannot make",           # the launch: the filter
    "runs_when_loaded": "runs code when it is loaded",                   # the build: sections
    "splices_an_include": "labs/02-tiled/tiled.cu, which is neither a header of the harness",
    "digraph_include": "labs/02-tiled/tiled.cu, which is neither a header of the harness",
}


def score(outcomes) -> float:
    return round(sum(o.score for o in outcomes if o.name.startswith(C_FILE)), 2)


@pytest.fixture(scope="module")
def cpu():
    return CpuBackend(timeout_s=20)


def build(cpu, tmp_path, text: str, defines=None, entry: str = "k"):
    source = tmp_path / C_FILE
    source.write_text(text)
    return cpu.compile(source, entry, defines)


# -------------------------------------------------------------------- the source rules

def test_every_kernel_file_of_the_course_reads_as_written():
    """No course file needs a line splice, a trigraph or a digraph: refusing them costs none."""
    files = [p for folder in ("labs", "exercises", "solutions", "tests/kernels", "kernelcourse/kernels")
             for p in sorted((REPO / folder).rglob("*.cu"))]
    assert len(files) > 15
    for path in files:
        c_rules.check_spelling(path.read_text(), str(path.relative_to(REPO)))


REFUSED_SOURCE = {
    "#inc\\\nlude <stdlib.h>": "line 2: ends with a backslash",
    "int a = 1; \\  \nint b;": "line 2: ends with a backslash",
    "??=include <stdlib.h>": "line 2: holds the trigraph '\\?\\?='",
    "%:include <stdlib.h>": "line 2: spells a token with the digraph '%:'",
    "int x<:1:> = {0};": "line 2: spells a token with the digraph '<:'",
    "#line 1 \"kernelcourse/kernels/portable.h\"": "line 2: uses #line",
    "# 1 \"portable.h\" 1": "line 2: uses #1",
    "#include_next <stdlib.h>": "line 2: uses #include_next",
    "#/*\n*/include <stdlib.h>": "line 2: includes a header other than",
    "const char* s = \"/*\";\n#include <stdlib.h>\nconst char* t = \"*/\";": "line 3: includes a header other than",
    "#include \"../../labs/02-tiled/tiled.cu\"": "line 2: includes a header other than",
    "#pragma GCC optimize(\"O0\")": "line 2: uses #pragma GCC",
    "#define P _Pragma(\"once\")": "line 2: uses _Pragma",
    "#define J(a, b) a##b": "line 2: pastes tokens",
    "#define A asm\nvoid f() { A(\"nop\"); }": "line 2: holds inline assembly",
    "[[gnu::constructor]] static void f() {}": "line 2: uses an attribute",
    "__attribute__((section(\".init_array\"))) void (*p)() = 0;": "line 2: uses an attribute",
    "#if __has_include(<stdlib.h>)\n#endif": "line 2: asks whether a file exists",
    "#define retain used": "line 2: has a #define of retain, a name the course headers use",
    "#undef min": "line 2: has a #undef of min, a name the course headers use",
}


@pytest.mark.parametrize("source", REFUSED_SOURCE, ids=list(REFUSED_SOURCE.values()))
def test_the_source_rules_refuse_what_the_text_hides_with_its_line(source):
    with pytest.raises(static.Refused, match=rf"tiled\.cu, {REFUSED_SOURCE[source]}"):
        static.check_c_source(PRELUDE + source + "\n" + KERNEL, C_FILE)


def test_the_source_rules_read_comments_literals_and_numbers_as_the_compiler_does():
    for fine in ('// #include <stdlib.h> and asm, in a comment', '/* a ?? <: %: in a comment */',
                 'const char* f = "a<%d, %s:> asm";', "const int n = 1'000'000;",
                 'const char* r = R"x(\n#include <stdlib.h>\n)x";',
                 "int four = sizeof(int) <::std::size_t(5) ? 4 : 5;", "#pragma unroll 4"):
        static.check_c_source(PRELUDE + fine + "\n" + KERNEL, C_FILE)


@pytest.mark.parametrize("cheat", ["splices_an_include", "digraph_include"])
def test_the_source_rules_refuse_each_cheat_that_respells_a_directive(cheat):
    said = header(CHEATS / f"{cheat}.cu", "says")[0]
    with pytest.raises(static.Refused, match=said):
        static.check_c_source((CHEATS / f"{cheat}.cu").read_text(), C_FILE)


@pytest.mark.parametrize("cheat", ["forges_results", "forges_results_by_hand", "runs_when_loaded"])
def test_what_the_source_rules_cannot_see_they_let_through(cheat):
    """Declarations, calls through pointers and initialisers are C: the build and the
    launch are what stop these three."""
    static.check_c_source((CHEATS / f"{cheat}.cu").read_text(), C_FILE)


# ------------------------------------------------------------- the cpu backend's build

LOADED = {
    "volatile int seen;\n__attribute__((constructor)) static void f() { seen = 1; }": ".init_array",
    "volatile int seen;\n[[gnu::destructor]] static void f() { seen = 1; }": ".fini_array",
    "static float g() { return 2.0f; }\nvolatile float x = g() + threadIdx.x;": "_GLOBAL__sub_I_",
    "__attribute__((target_clones(\"avx2\", \"default\"))) int h(int a) { return a + 1; }": "_Z1hi",
    # functions the C runtime's start-up code calls if they exist: crti's _init calls
    # __gmon_start__, crtbegin's frame_dummy _ITM_registerTMCloneTable, with no attribute at all
    'volatile int seen;\nextern "C" void __gmon_start__(void) { seen = 1; }': "__gmon_start__",
    'volatile int seen;\nextern "C" void _ITM_registerTMCloneTable(void*, unsigned long) { seen = 1; }':
        "_ITM_registerTMCloneTable",
}


@pytest.mark.parametrize("source", LOADED, ids=list(LOADED.values()))
def test_the_build_refuses_an_object_that_runs_code_when_it_is_loaded(cpu, tmp_path, source):
    with pytest.raises(CompileError, match=rf"tiled\.cu runs code when it is loaded or unloaded \(.*{LOADED[source]}"):
        build(cpu, tmp_path, PRELUDE + source + "\n" + KERNEL)


def test_the_build_checks_the_object_it_links_with_its_own_defines(cpu, tmp_path):
    """A call hidden behind a define of the build's (TILE) is in the object the library is
    linked from, and named with its line; without the define, there is none to name."""
    hidden = PRELUDE + '#ifdef TILE\nextern "C" int system(const char*);\n#endif\n' + \
        'extern "C" __global__ void k(float* y) {\n#ifdef TILE\n    system("true");\n#endif\n}\n'
    with pytest.raises(CompileError, match=r"tiled\.cu calls system \(line 3\): device code may call only"):
        build(cpu, tmp_path, hidden, {"TILE": 32})
    build(cpu, tmp_path, hidden)


@pytest.mark.parametrize("source, said", [
    ("#define sgemm lab\n#inc\\\nlude \"../../labs/02-tiled/tiled.cu\"",
     r"tiled\.cu:4: includes .*labs/02-tiled/tiled\.cu, which is neither a header of the harness"),  # its last line
    ("void f() { as\\\nm volatile(\"syscall\"); }", r"tiled\.cu:2: the cpu backend does not emulate inline assembly"),
    ("#define A __asm__\nvoid f() { A(\"nop\"); }", r"tiled\.cu:3: the cpu backend does not emulate inline assembly"),
    ('extern int run(const char*) __REDIRECT_NTH(run, (const char*), system);',
     r"tiled\.cu:2: the cpu backend does not emulate inline assembly \(PTX or GCN\) \('__asm__'\)"),
    ('extern "C" int fork() { return 0; }', r"tiled\.cu defines fork, a name the cpu backend's launch code uses"),
    ("namespace kc { void stop(const char*) {} }", r"tiled\.cu defines _ZN2kc4stopEPKc"),
], ids=["include outside the harness", "spliced asm", "asm from a macro", "asm label from glibc",
        "a libc name", "a runtime name"])
def test_the_build_reads_the_kernel_after_the_preprocessor_and_its_object(cpu, tmp_path, source, said):
    with pytest.raises(CompileError, match=said):
        build(cpu, tmp_path, PRELUDE + source + "\n" + KERNEL)


def test_a_header_is_the_systems_by_where_it_is_not_by_the_folder_that_found_it(cpu, tmp_path):
    """<../../labs/...> found from the system's include folder is still the course's kernel."""
    system = system_include_dirs(find_compiler())[-1]
    through = os.path.relpath(REPO / "labs" / "02-tiled" / "tiled.cu", system)
    with pytest.raises(CompileError, match=r"tiled\.cu:2: includes .*labs/02-tiled/tiled\.cu, which is "
                                           r"neither a header of the harness"):
        build(cpu, tmp_path, PRELUDE + f"#include <{through}>\n" + KERNEL)


# ----------------------------------------------------------------------------- the launch

CALLS = PRELUDE + """typedef long (*call3)(size_t, size_t, size_t);

extern "C" __global__ void call(size_t function, size_t a0, size_t a1, size_t a2, float* out)
{
    out[threadIdx.x] = 1.0f;
    if (threadIdx.x == 1) ((call3)function)(a0, a1, a2);
    printf("thread %u went on\\n", threadIdx.x);
}
"""


@pytest.mark.parametrize("function, arguments, call", [
    ("write", lambda text: (3, text, 1), "write"),
    ("open", lambda text: (text, 0, 0), "openat"),
    ("fork", lambda text: (0, 0, 0), "clone"),
    ("syscall", lambda text: (39, 0, 0), "getpid"),         # SYS_getpid on x86-64
])
def test_a_launch_that_makes_a_system_call_is_stopped_and_the_call_named_with_its_line(
        cpu, tmp_path, function, arguments, call):
    """The function found by address, as a kernel that walks memory finds it: no import and
    no static check sees the call, and the filter stops it all the same."""
    kernel = build(cpu, tmp_path, CALLS, entry="call")
    libc = ctypes.CDLL(None)
    text = ctypes.create_string_buffer(b"/etc/hostname")
    address = ctypes.cast(getattr(libc, function), ctypes.c_void_p).value
    out = cpu.to_device(np.zeros(4, np.float32))
    with pytest.raises(KernelFault, match=rf"call: the kernel made a system call \({call}\) that a GPU "
                                          rf"kernel cannot make at \S*tiled\.cu:7, in thread \(1, 0, 0\)"):
        kernel((1,), (4,), (address, *arguments(ctypes.addressof(text)), out))


def test_printf_and_fresh_memory_still_work_inside_a_launch(cpu, tmp_path, capfd):
    kernel = build(cpu, tmp_path, CALLS, entry="call")
    malloc = ctypes.cast(ctypes.CDLL(None).malloc, ctypes.c_void_p).value
    out = cpu.to_device(np.zeros(4, np.float32))
    kernel((1,), (4,), (malloc, 64 << 20, 0, 0, out))            # 64 MiB: an mmap of its own
    assert capfd.readouterr().out.count("went on\n") == 4
    assert cpu.to_host(out).tolist() == [1.0] * 4


def test_an_assert_and_the_stack_protector_stop_a_launch_with_their_own_reason(cpu, tmp_path):
    """Both would end in abort(), whose system calls the filter refuses: the runtime's own
    stop the launch and say what happened instead (make check may include <cassert>)."""
    checked = PRELUDE + """#include <cassert>
extern "C" __global__ void k(float* y, int n)
{
    assert(threadIdx.x < (unsigned)n);
    char local[16];
    for (int i = 0; i < n; ++i) ((volatile char*)local)[i] = 1;
    y[threadIdx.x] = local[3];
}
"""
    source = tmp_path / C_FILE
    source.write_text(checked)
    kernel = cpu.compile(source, "k", options=("-fstack-protector-all",))
    y = cpu.to_device(np.zeros(4, np.float32))
    kernel((1,), (4,), (y, 8))
    with pytest.raises(KernelFault, match=r"k was stopped: assertion failed: threadIdx\.x < \(unsigned\)n "
                                          r"\(\S*tiled\.cu:5, in void k\(float\*, int\)\)"):
        kernel((1,), (8,), (y, 4))
    with pytest.raises(KernelFault, match="k was stopped: stack smashing detected"):
        kernel((1,), (1,), (y, 64))


# In a Python of its own: a launch child is a fork of its caller, and a caller made not
# dumpable (make_run does so to the grader, and to pytest's process in other tests) has
# children whose /proc entries only root may read.
DESCRIPTORS = f"""
import dataclasses, os, threading, time
from pathlib import Path
import numpy as np
from kernelcourse.backends.cpu import CpuBackend
cpu = CpuBackend(timeout_s=20)
spin = cpu.compile({str(KERNELS / "spin.cu")!r}, "spin")
flag = cpu.to_device(np.zeros(1, np.int32).view(np.float32))
flag = dataclasses.replace(flag, dtype=np.dtype(np.int32))
out = cpu.to_device(np.zeros(32, np.float32))
read, write = os.pipe()                       # a pipe of the caller's, as the result pipe is
launch = threading.Thread(target=spin, args=((1,), (32,), (flag, out)))
launch.start()
deadline, children = time.monotonic() + 20, []
while not children and time.monotonic() < deadline:   # the launch child: forked by that thread
    children = Path(f"/proc/self/task/{{launch.native_id}}/children").read_text().split()
held = None                 # it closes what it inherited before the kernel runs: until then, wait
while held != [0, 1, 2] and time.monotonic() < deadline:
    held = sorted(int(fd) for fd in os.listdir(f"/proc/{{children[0]}}/fd"))
print(held, read, write)
flag.numpy()[0] = 1
launch.join()
"""


def test_a_launch_holds_no_descriptor_but_stdin_stdout_and_stderr():
    """Seen from outside while the launch runs (the kernel spins until the flag is set): a
    pipe the caller holds is not among the launch child's descriptors, nor any other of the
    caller's. (Right after the fork it still holds them, until it closes them.)"""
    done = subprocess.run([sys.executable, "-c", DESCRIPTORS], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    listed, read, write = done.stdout.rsplit("]", 1)[0] + "]", *done.stdout.rsplit("]", 1)[1].split()
    assert listed == "[0, 1, 2]" and int(read) > 2 and int(write) > 2, done.stdout


# ------------------------------------------------------------- graded, static check off

@pytest.fixture(scope="module")
def unchecked(tmp_path_factory):
    """The cheats and the solution graded once with the static check off: {student:
    (outcomes, the text of its results.json)}."""
    return submissions.graded_without_static_checks(
        tmp_path_factory.mktemp("c-layers"), C_FILE,
        {name: (CHEATS / f"{name}.cu").read_text() for name in UNCHECKED})


@pytest.mark.parametrize("cheat", UNCHECKED)
def test_without_the_static_check_the_build_or_the_launch_alone_stops_each_cheat(cheat, unchecked):
    outcomes, results = unchecked[cheat]
    assert score(outcomes) == 0, results
    assert UNCHECKED[cheat] in results, outcomes[0].output


def test_the_solution_keeps_full_marks_behind_every_layer(unchecked):
    outcomes, results = unchecked["solution"]
    assert score(outcomes) == 10, results

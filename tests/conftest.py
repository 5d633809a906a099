"""Shared fixtures, the markers each test carries, and the rule for missing compilers.

GPU tests are marked `gpu` and skip cleanly where there is no GPU.

Every test carries the markers of what it covers (pyproject.toml declares them): the part of
the harness, from its file's `pytestmark` (tests/grading/ is the grader's), and the labs and
exercises, here, from what it is given: a parametrized test run on a rung, a rung's name or a
file of labs/NN-*/ (or exercises/ or solutions/) gets that lab's (or exercise's) marker, and
so do a test named for a rung and a notebook. So `pytest -m lab03` runs lab 03's rung and its notebook, and
`make test LAB=03` does. The slowest tests, as measured (SLOW below), are marked `slow`:
`make test-fast` leaves them out.

A test that needs a compiler this machine lacks raises CompilerNotFound. On a student's
machine that is a skip, and the run ends with one line naming the compile paths that were
not exercised and the command that adds them. Where the compilers are part of the contract
(CI sets KERNELCOURSE_REQUIRE_COMPILERS=1), it is a failure: a compiler gone missing must
never turn real tests into silent skips. The skip carries what was missing in its report,
so that under pytest-xdist the one process that reads every worker's reports can count them.
"""
import os
import re
import sys
from collections import Counter
from pathlib import Path

# One thread in every BLAS and OpenMP pool of the processes the suite starts (numpy's, torch's,
# before either is imported): those processes run side by side (pytest-xdist's workers, the
# check's and the grader's children), and threads that spin while they wait for work only take
# the cores from the others. Set one of these to override it.
for _pool in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_pool, "1")

import pytest  # noqa: E402

import kernelcourse  # noqa: E402,F401  (chooses Triton's interpreter before any kernel is defined)
from kernelcourse.backends.compile_only import CompilerNotFound  # noqa: E402
from kernelcourse.device import detect  # noqa: E402

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "kernels"))
REQUIRE_COMPILERS = os.environ.get("KERNELCOURSE_REQUIRE_COMPILERS") == "1"
MISSING = "missing compilers"                 # the key of a skip's user_properties entry
_missing: dict[str, str] = {}                 # compiler -> the command that adds it
_skipped = [0]                                # tests skipped for a missing compiler


def _skip_or_fail(item, exc: CompilerNotFound):
    if REQUIRE_COMPILERS:
        pytest.fail(f"{exc.compiler} is required here (KERNELCOURSE_REQUIRE_COMPILERS=1) and "
                    f"missing: {exc}", pytrace=False)
    # 'hiprtc and hipcc': both are missing
    item.user_properties.append((MISSING, [(compiler, exc.fix) for compiler in exc.compiler.split(" and ")]))
    pytest.skip(f"not installed here: {exc.compiler}: {exc}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    try:
        return (yield)
    except CompilerNotFound as exc:
        _skip_or_fail(item, exc)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        return (yield)
    except CompilerNotFound as exc:
        _skip_or_fail(item, exc)


def pytest_runtest_logreport(report):
    """Every report passes here, in the process that runs the tests or, under pytest-xdist,
    in the controller too, which receives each worker's."""
    if report.skipped:
        for key, compilers in report.user_properties:
            if key == MISSING:
                _skipped[0] += 1
                for compiler, fix in compilers:
                    _missing.setdefault(compiler, fix)


def pytest_unconfigure(config):
    """After pytest's own last line: what this run could not exercise, and how to add it.
    Said once, by the controller where pytest-xdist runs workers (a worker has workerinput)."""
    if not _missing or hasattr(config, "workerinput"):
        return
    compilers = sorted(_missing)          # reports come in any order from several workers
    fixes = " && ".join(dict.fromkeys(_missing[compiler] for compiler in compilers))
    print(f"NOT EXERCISED: the {', '.join(compilers)} compile path(s) ({_skipped[0]} tests "
          f"skipped; this machine lacks them). Add them: {fixes}")


# ------------------------------------------------- labs, exercises and slow tests as markers

COURSE_FOLDER = re.compile(r"(?:^|[/\\])(labs|exercises|solutions)[/\\](\d\d)-")
# test_exercises.py checks all three exercises: test_01_* and test_02_* are 01's and 02's, a
# test given an exercise's folder is that exercise's, and the rest are 03's.
NUMBERED_TEST = re.compile(r"test_(\d\d)_")
FOLDER_PARTS = {"tests/grading/": "grader"}
# The slow tests, as measured (--durations, 2 cores): by file, the tests (by name) that take a
# second or more, or come in dozens of half a second; and every test that needs a graded
# folder or the ahead-of-time build of every candidate (fixtures of many seconds), and every
# notebook. `make test-fast` leaves them out.
SLOW = {
    "test_compile_only.py": r"test_triton_compiles_ahead_of_time",
    "test_cpu_aarch64.py": r"test_the_runtime_gives|test_the_drivers_gemm|test_aarch64_",
    "test_cpu_backend.py": r"test_each_rung_of_the_ladder|test_each_broken_tiled_kernel|test_a_grid_rounded_down"
                           r"|test_an_fp16_accumulator|test_a_kernel_that_never_finishes|test_a_read_past_the_end"
                           r"|test_a_read_before_the_start_is",
    "test_cpu_shared.py": r"test_the_shared_section_holds",
    "test_diagnosis.py": r"test_a_variant_fails|test_a_hang_is_shown",
    "test_executed_notebooks.py": r"test_the_script_executes_a_lab_here",
    "test_exercise_00.py": r"test_a_known_wrong_kernel|test_a_stub_whose_code|test_the_grader",
    "test_exercise_folders.py": r"test_the_notebook_runs",
    "test_exercises.py": r"test_0[12]_|test_a_known_wrong_answer",
    "test_figures.py": r"test_the_script_writes_every_figure",
    "test_grade.py": r"",
    "test_hopper_cpu.py": r"test_passes_the_cpu_suite",
    "test_lab_backends.py": r"test_a_lab_runs_or_says",
    "test_lab00.py": r"test_each_c_kernel_passes|test_each_triton_twin_passes|test_a_broken_kernel_is_given",
    "test_ladder.py": r"test_twin_passes_verification|test_the_c_rungs_agree_bit_for_bit",
    "test_make_notebooks.py": r"test_make_notebooks_serves",
    "test_module_sass.py": r"test_the_triton_ptx_counts",
    "test_matrix_cores.py": r"test_passes_the_cpu_suite|test_the_copying_rungs_pass|test_compiles_for_"
                            r"|test_each_build_takes_arrays|test_bf16_is_rounded",
    "test_recorded.py": r"test_a_cpu_run_of_the_ladder",
    "test_simt_top.py": r"test_passes_the_cpu_suite|test_configurations_of_the_sweep_pass|test_every_configuration_of_the_sweep"
                        r"|test_misaligned_pointers_on_the_cpu|test_the_sweep_runs_end_to_end",
    "test_site.py": r"test_every_page|test_every_anchor|test_the_module|test_the_notebooks|test_the_glossary|test_the_checker"
                    r"|test_a_broken_anchor",
    "test_support.py": r"test_a_sample_of_compiled_cells",
    "test_suite_rules.py": r"test_a_missing_compiler|test_where_the_compilers_are_required",
    "test_triton_bounds.py": r"test_verify_names|test_make_check_and_the_grader|test_the_course_twins_pass"
                             r"|test_the_exercise_stub_as_shipped",
    "test_triton_gemm.py": r"test_fixed_config_passes|test_split_k_passes_the_cpu_suite|test_before_sm80",
    "test_verify.py": r"test_correct_triton_gemm|test_each_bug_is_caught|test_missing_k_mask|test_out_of_bounds_write"
                      r"|test_unwritten_elements",
    "grading/test_channel.py": r"test_a_second_writer",
    "grading/test_cluster.py": r"test_slurm_tasks|test_a_killed_task|test_the_local_tasks",
    "grading/test_gradescope_and_users.py": r"test_the_gradescope_zip",
    "grading/test_runner_robustness.py": r"",
    "grading/test_static_checks.py": r"test_the_static_check_is_the_defence",
    "grading/test_timing_and_gpus.py": r"test_the_probe_runs|test_the_timing_path_runs",
}
SLOW_FIXTURES = {"graded01", "graded02", "graded03", "unchecked", "aot"}
COLLECTED = pytest.StashKey[list]()            # (file, test name) of every test collected


def _slow(item) -> bool:
    path = item.nodeid.partition("::")[0]
    if path.endswith(".ipynb") or SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    name = path.removeprefix("tests/")
    return name in SLOW and re.match(SLOW[name], getattr(item, "originalname", item.name)) is not None


def _folder_marks(text: str) -> set[str]:
    """lab03 for a path in labs/03-*/, ex01 for one in exercises/01-*/ or solutions/01-*/."""
    return {("lab" if kind == "labs" else "ex") + number for kind, number in COURSE_FOLDER.findall(text)}


def _parameter_marks(name: str, value, rung_labs: dict) -> set[str]:
    from kernelcourse.rung import Rung
    if isinstance(value, Rung):
        return _folder_marks(str(value.source))
    if isinstance(value, str) and value in rung_labs:          # a rung by name
        return {rung_labs[value]}
    if name == "number" and isinstance(value, str) and re.fullmatch(r"\d\d", value):
        return {f"lab{value}"}                                 # a lab by number, as run-lab takes it
    if isinstance(value, (str, Path)):
        return _folder_marks(str(value))
    return set()


@pytest.hookimpl(tryfirst=True)     # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    from kernelcourse.rungs import RUNG
    rung_labs = {name: mark for name, rung in RUNG.items() for mark in _folder_marks(str(rung.source))}
    config.stash[COLLECTED] = [(item.nodeid.partition("::")[0], getattr(item, "originalname", item.name))
                               for item in items]
    for item in items:
        path = item.nodeid.partition("::")[0]
        marks = _folder_marks(path) | {part for folder, part in FOLDER_PARTS.items() if path.startswith(folder)}
        if path.endswith(".ipynb"):
            marks.add("notebooks")
        if _slow(item):
            marks.add("slow")
        for name, value in getattr(getattr(item, "callspec", None), "params", {}).items():
            marks |= _parameter_marks(name, value, rung_labs)
        words = f"_{getattr(item, 'originalname', item.name)}_"
        marks |= {mark for rung, mark in rung_labs.items() if f"_{rung}_" in words}   # named for a rung
        if item.path.name == "test_exercises.py" and not any(m.startswith("ex") for m in marks):
            numbered = NUMBERED_TEST.match(item.name)
            marks.add(f"ex{numbered[1]}" if numbered else "ex03")
        for mark in sorted(marks - {m.name for m in item.iter_markers()}):
            item.add_marker(mark)
    if hasattr(config, "workerinput"):
        # Under pytest-xdist, which sends whole files in this order (`make test`): the files
        # with the most slow tests first, those with none last, so that the short ones fill
        # both workers to the end and neither waits alone on a long one. Every worker sorts
        # alike; a file's own tests keep their order.
        file_of = {item: item.nodeid.partition("::")[0] for item in items}
        slow_in = Counter(file_of[item] for item in items if item.get_closest_marker("slow"))
        first = {}
        for index, item in enumerate(items):
            first.setdefault(file_of[item], index)
        items.sort(key=lambda item: (-slow_in[file_of[item]], first[file_of[item]]))


# --------------------------------------------------------------------------------- fixtures

@pytest.fixture
def collected(request) -> list[tuple[str, str]]:
    """(file, test name) of every test this run collected, before -m and -k deselected any."""
    return request.config.stash[COLLECTED]


@pytest.fixture
def slow_table() -> dict[str, str]:
    return SLOW


@pytest.fixture(scope="session")
def nvidia():
    device = detect()
    if device.vendor != "nvidia":
        pytest.skip(f"needs an NVIDIA GPU; this machine: {device.describe()}")
    return device


@pytest.fixture(scope="session")
def cuda_backend(nvidia):
    from kernelcourse.backends import get_backend
    return get_backend("cuda")


@pytest.fixture(scope="session")
def triton_backend():
    from kernelcourse.backends import get_backend
    return get_backend("triton")

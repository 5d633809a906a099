"""One submission through the grader: its files copied (intake.py), each held to the
static checks, and then its tests run in children (driver.py), one job at a time.

The submission's scratch folder holds its files and the inputs drawn for it, and is handed
to its children's uid. On a GPU a C file runs on the GPU and on the cpu backend, and each
class takes the smaller share (Submission._correctness). A test whose child hangs,
crashes or sends what it was not asked for costs that test (driver.py). results.json is
rewritten after each job, so a run cut short still leaves what was graded.

Run holds what every submission of one grading run shares: the exercise, the seed, the
workers' isolation, and each GPU's GpuGate, which gives a timed run its GPU to itself.
"""
from __future__ import annotations

import math
import shutil
import tempfile
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import inputs, intake, op_grading, perf, report, static
from .driver import drive, voided
from .judge import Outcome, ShapeRuns, judge_function, judge_gemm
from .leftovers import kill_group
from .sandbox import Child, Isolation, child_environment
from .spec import FunctionTest, GemmTest, Grading, OpTest
from ..kernel_text import same_code
from ..verify import canary_length

PERF_TIME_LIMIT_S = 300


@dataclass
class Run:
    """One grading run: the exercise, the seed, where things go, what this machine has."""

    exercise: Path
    spec: Grading                  # what is graded: the files, the tests, the limits
    checks: object                 # its checks.py (exercise 03 judges with its judge)
    seed: int
    out: Path
    c_backend: str                 # where C kernels run: 'cpu', 'cuda' or 'hip'
    on_gpu: bool
    gpus: list = field(default_factory=list)
    test_time_limit: float = 0.0
    submission_time_limit: float = 0.0
    scratch_root: Path = None
    flat: bool = False             # one submission, results.json straight into `out` (Gradescope)
    label: str = ""                # the student of a regrade: the run's files are named for them
    static_checks: bool = True     # off only in the tests that show each later defence alone
    gates: dict = field(default_factory=dict)
    isolation: dict = field(default_factory=dict)

    def __post_init__(self):
        self.test_time_limit = self.test_time_limit or self.spec.test_time_limit_s
        self.submission_time_limit = self.submission_time_limit or self.spec.time_limit_s
        self.scratch_root = Path(tempfile.mkdtemp(prefix="kernelcourse-grade-"))
        self.scratch_root.chmod(0o711)            # children may pass through, never list it
        self.gates = {gpu: GpuGate() for gpu in self.gpus}
        self.layout = report.Layout(self.out, self.label, self.flat)
        self.children: set[Child] = set()         # running now: what interrupt() stops
        self.children_lock = threading.Lock()
        self.stopping = threading.Event()         # set by interrupt(): no child starts again

    def worker(self, w: int) -> tuple[Isolation, str | None]:
        if w not in self.isolation:
            self.isolation[w] = Isolation.probe(w)
        return self.isolation[w], (self.gpus[w % len(self.gpus)] if self.gpus else None)

    def pending(self, test, why: str = "not graded yet") -> list[Outcome]:
        return test_at_zero(test, self.on_gpu, why)

    def perf_outcome(self, test: GemmTest, score: float, why: str) -> Outcome:
        return perf_outcome(test, self.on_gpu, score, why)

    def every_test_at_zero(self, why: str) -> list[Outcome]:
        return every_test_at_zero(self.spec, self.on_gpu, why)

    def write_results(self, student: str, outcomes: list[Outcome], notes: list[str], seconds: float) -> None:
        """A student's results.json: every test, and the notes on the submission as a whole."""
        lines = [f"exercise {self.exercise.name}, graded {'on a GPU' if self.on_gpu else 'on a CPU'}", *notes]
        if not self.on_gpu and any(getattr(t, "perf_points", 0) for t in self.spec.tests):
            lines.append("Performance points are graded on a GPU machine by the instructor; "
                         "this run (no GPU) grades correctness only.")
        payload = report.results_json(outcomes, "\n".join(lines), seconds,
                                      {"student": report.visible(student), "exercise": self.exercise.name})
        report.write_json(self.layout.results(student), payload)

    def interrupt(self) -> None:
        """The run is stopped (Ctrl-C, SIGTERM): no child starts again, and those running are
        killed; each test they were in says so."""
        self.stopping.set()
        with self.children_lock:
            running = list(self.children)
        for child in running:
            kill_group(child.process.pid)

    def close(self) -> None:
        shutil.rmtree(self.scratch_root, ignore_errors=True)


def test_at_zero(test, on_gpu: bool, why: str = "not graded yet") -> list[Outcome]:
    """A test's outcomes at 0 points, each saying why."""
    if isinstance(test, FunctionTest):
        return [Outcome(f"{test.name}()", test.points, 0.0, why)]
    outcomes = _class_outcomes(test, why)
    if test.perf_points:
        outcomes.append(perf_outcome(test, on_gpu, 0.0, why))
    return outcomes


def perf_outcome(test: GemmTest, on_gpu: bool, score: float, why: str) -> Outcome:
    if not on_gpu:                    # listed, worth nothing here: the GPU run grades it
        return Outcome(f"{test.file}: performance", 0.0, 0.0,
                       f"performance ({test.perf_points} points) is graded on a GPU machine")
    return Outcome(f"{test.file}: performance", test.perf_points, score, why)


def every_test_at_zero(spec: Grading, on_gpu: bool, why: str) -> list[Outcome]:
    """Every test of `spec` at 0 points, as a run on a GPU (or not) lists them."""
    return [o for test in spec.tests for o in test_at_zero(test, on_gpu, why)]


def _class_outcomes(test: GemmTest, why: str) -> list[Outcome]:
    return [Outcome(f"{test.file}: {c.title}", test.points[c.name], 0.0, why) for c in test.classes()]


class GpuGate:
    """Who may use one GPU: any number of correctness runs at once (`shared`), or one timed
    run alone (`alone`). A timed run that is waiting lets no new correctness run in, so it
    waits only for those already running."""

    def __init__(self):
        self._turn = threading.Condition()
        self._sharing, self._waiting, self._alone = 0, 0, False

    @contextmanager
    def shared(self):
        with self._turn:
            self._turn.wait_for(lambda: not self._alone and not self._waiting)
            self._sharing += 1
        try:
            yield
        finally:
            with self._turn:
                self._sharing -= 1
                self._turn.notify_all()

    @contextmanager
    def alone(self):
        with self._turn:
            self._waiting += 1
            self._turn.wait_for(lambda: not self._alone and not self._sharing)
            self._waiting -= 1
            self._alone = True
        try:
            yield
        finally:
            with self._turn:
                self._alone = False
                self._turn.notify_all()


# ------------------------------------------------------------------------ one submission

class Submission:
    """One student's grading: the scratch folder, the clock, the outcomes so far."""

    def __init__(self, run: Run, student: str, folder: Path, worker: int):
        self.run, self.student = run, student
        self.isolation, self.gpu = run.worker(worker)
        self.started = time.monotonic()
        self.deadline = self.started + run.submission_time_limit
        self.scratch = Path(tempfile.mkdtemp(prefix=f"{worker}-", dir=run.scratch_root))
        self.outcomes: dict[str, list[Outcome]] = {}
        # the student's folder is only read; what is graded is the copy in scratch/submission
        copied = intake.copy_files(folder, run.spec.files, self.scratch / "submission")
        self.notes: list[str] = copied.notes
        self.present: set[str] = copied.present        # the files copied into scratch/submission
        self.refused: dict[str, str] = copied.refused  # file -> why it is not graded
        self.isolation.own(self.scratch)
        self.env = child_environment(self.scratch, self.gpu)

    def write(self) -> None:
        """results.json as it stands: every test, graded or not yet."""
        self.run.write_results(self.student, self.outcomes_now(), self.notes, time.monotonic() - self.started)

    def outcomes_now(self) -> list[Outcome]:
        return [o for test in self.tests() for o in self.outcomes.get(self.key(test), self.run.pending(test))]

    def tests(self):
        return self.run.spec.tests

    @staticmethod
    def key(test) -> str:
        return test.file if isinstance(test, GemmTest) else test.name

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    # -- GEMM exercises
    def grade_gemm(self) -> None:
        tests = [t for t in self.tests() if isinstance(t, GemmTest)]
        runnable = []
        for test in tests:
            why = self.refused.get(test.file) or self._refusal(test)
            if why:
                self.outcomes[test.file] = self.run.pending(test, why)
            else:
                runnable.append(test)
        if runnable:
            self._correctness(runnable)
        self.write()
        for test in runnable:
            if test.perf_points and self.run.on_gpu:
                self._performance(test)
                self.write()

    def _refusal(self, test: GemmTest) -> str | None:
        """Why the file is not run at all: missing, or refused by the static check of its
        source. (A C file's object is checked by the cpu backend itself, on the build it
        loads, before loading it: what it imports, and nothing that runs when it is loaded;
        every C file runs on the cpu backend, on a GPU host too.)"""
        if test.file not in self.present:
            return f"{test.file} is missing from the submission"
        if not self.run.static_checks:
            return None
        text = (self.scratch / "submission" / test.file).read_text(errors="replace")
        try:
            if test.kind == "triton":
                static.check_triton(text, test.file)
            else:
                static.check_c_source(text, test.file)
        except static.Refused as exc:
            return f"static check: {exc}\n(the static check is the defence against a library GEMM; see GRADING.md)"
        return None

    def _correctness(self, tests: list[GemmTest]) -> None:
        """Every file on this machine's backends. On a GPU a C file runs twice: on the GPU
        (its shapes, the large ones included) and on the cpu backend (the CPU's shapes), and
        each class earns the smaller of its two shares. A race, a barrier part of a block
        never reaches, shared memory read before it is written and a read past the inputs
        give results on a GPU that change from run to run or happen to be right; on the cpu
        backend each shows on every run (a new thread order per launch from a fixed
        sequence, NaN-filled shared memory, guard pages). So a grade never depends on the
        run, JOBS=1 and JOBS=4 agree, and a regrade reproduces it."""
        outcomes = self._correctness_on(tests, self.run.c_backend, self.run.on_gpu)
        # (a file with no point on the GPU keeps none: min(0, x) needs no second run)
        c_tests = [t for t in tests if t.kind == "c" and any(o.score for o in outcomes[t.file])]
        if self.run.on_gpu and c_tests:
            emulated = self._correctness_on(c_tests, "cpu", False)
            for test in c_tests:
                outcomes[test.file] = [_smaller(gpu, cpu) for gpu, cpu in zip(outcomes[test.file], emulated[test.file])]
        for test in tests:
            if test.perf_points:
                ready = all(o.status == "passed" for o in outcomes[test.file])
                why = ("not yet timed" if ready and self.run.on_gpu else
                       "no performance points: the kernel must first be right on every shape class")
                outcomes[test.file].append(self.run.perf_outcome(test, 0.0, why))
            self.outcomes[test.file] = outcomes[test.file]

    def _correctness_on(self, tests: list[GemmTest], backend: str, on_gpu: bool) -> dict[str, list[Outcome]]:
        """Each file's class outcomes on one backend, with that backend's shapes."""
        seed = self.run.seed
        folder = self.scratch / f"inputs-{backend}"
        folder.mkdir()
        plan, shapes_of = [], []
        for t, test in enumerate(tests):
            per_class = {c.name: c.shapes(on_gpu) for c in test.classes()}
            shapes = list(dict.fromkeys(s for c in per_class.values() for s in c))
            entries = []
            for s, shape in enumerate(shapes):
                files = []
                for index in range(2):
                    A, B, _ = inputs.gemm_case(seed, test.file, shape, index, test.dtype)
                    names = (folder / f"{t}-{s}-{index}-A.npy", folder / f"{t}-{s}-{index}-B.npy")
                    np.save(names[0], A)
                    np.save(names[1], B)
                    files.append([str(n) for n in names])
                entries.append({"M": shape.M, "N": shape.N, "K": shape.K, "inputs": files,
                                "runs": self._runs(test)})
            # a launch's own limit well inside the test's, so a hang is named as one
            plan.append({"file": test.file, "kind": test.kind, "rung": test.rung, "dtype": test.dtype,
                         "shapes": entries,
                         "launch_timeout_s": self.run.test_time_limit / 3})
            shapes_of.append((per_class, shapes))
        for path in [folder, *folder.iterdir()]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        got = [{s: ShapeRuns(s) for s in shapes} for _, shapes in shapes_of]
        ran = {}

        def arrays(header):
            """C with its canary zones, or the inputs as they came back (the channel checked
            test, shape and what against the plan)."""
            shape = shapes_of[header["test"]][1][header["shape"]]
            M, N, K = shape.M, shape.N, shape.K
            return "float32", {"C": (2 * canary_length(N) + M * N,), "A": (M, K), "B": (K, N)}[header["what"]]

        def on_message(header, array):
            t = header["test"]
            if "compile_error" in header:
                ran[t] = "does not compile; the compiler's log:\n" + header["compile_error"]
            elif "load_error" in header:
                ran[t] = f"could not be loaded: {header['load_error']}"
            elif "ran" in header:
                ran[t] = f"ran on the {header['ran']}"
            else:
                record = got[t][shapes_of[t][1][header["shape"]]]
                if "crash" in header:
                    record.crash = header["crash"]
                elif header["what"] == "C":
                    record.runs.append([array])
                else:                                   # A, then B, after that run's C
                    record.runs[-1].append(array)

        budget = sum(4 * math.prod(arrays({"test": t, "shape": s, "what": w})[1]) * len(e["runs"])
                     for t, p in enumerate(plan) for s, e in enumerate(p["shapes"]) for w in "CAB") + (1 << 20)
        job = {"kind": "gemm", "folder": str(self.scratch / "submission"), "backend": backend,
               "tests": plan}
        with self.run.gates[self.gpu].shared() if on_gpu else nullcontext():
            ended = drive(self, job, len(tests), on_message, arrays, budget, self.run.test_time_limit)
        found = {}
        for t, test in enumerate(tests):
            per_class, shapes = shapes_of[t]
            if t in ended and voided(ended[t]):
                found[test.file] = _class_outcomes(test, ended[t])
                continue
            header = ran.get(t, "")
            if t in ended:
                header = (header + "\n" if header else "") + f"stopped: {ended[t]}"
            for shape in shapes:
                record = got[t][shape]
                record.runs = [tuple(r) for r in record.runs if len(r) == 3]
                if t in ended and not record.crash and len(record.runs) < len(self._runs(test)):
                    record.crash = ended[t].splitlines()[0]
            pads = {s: canary_length(s.N) for s in shapes}
            found[test.file] = judge_gemm(test, per_class, got[t],
                                          lambda s: [inputs.gemm_case(seed, test.file, s, i, test.dtype) for i in range(2)],
                                          self._runs(test), pads, header, self._as_shipped(test))
        return found

    def _as_shipped(self, test: GemmTest) -> bool:
        """Whether the file's code is the exercise's own stub, its comments aside."""
        return same_code(self.scratch / "submission" / test.file, self.run.exercise / test.file)

    @staticmethod
    def _runs(test: GemmTest) -> list[int]:
        """Input set per run: a C kernel runs set 0 twice (a race shows as results that move),
        then set 1 in the same buffers; a Triton twin set 0, then set 1."""
        return [0, 0, 1] if test.kind == "c" else [0, 1]

    def _performance(self, test: GemmTest) -> None:
        outcomes = self.outcomes[test.file]
        if outcomes[-1].output.startswith("no performance points"):
            return
        seeds = [inputs.derived_seed(self.run.seed, self.student, test.file, r) for r in range(perf.REPEATS)]
        plan = {"file": test.file, "kind": test.kind, "rung": test.rung, "dtype": test.dtype,
                "launch_timeout_s": self.run.test_time_limit}
        job = {"kind": "perf", "folder": str(self.scratch / "submission"), "backend": self.run.c_backend,
               "test": plan, "seeds": seeds}
        got = {"outputs": []}

        def on_message(header, array):
            if "times" in header:
                got["times"] = header["times"]
            else:
                got["outputs"].append(array)

        arrays = lambda header: ("float32", (perf.SIZE, perf.SIZE))  # noqa: E731
        with self.run.gates[self.gpu].alone():          # nothing else on this GPU meanwhile
            ended = drive(self, job, 1, on_message, arrays, 4 * perf.SIZE ** 2 * perf.REPEATS + (1 << 20),
                          PERF_TIME_LIMIT_S)
        if ended or "times" not in got or len(got["outputs"]) != perf.REPEATS:
            score, line = 0.0, f"the timed run did not complete: {ended.get(0, 'incomplete results')}"
        else:
            score, line = perf.judge(got["times"], got["outputs"], seeds, test.perf_points, test.dtype)
        outcomes[-1] = self.run.perf_outcome(test, score, line)

    # -- Python functions
    def grade_functions(self) -> None:
        tests = [t for t in self.tests() if isinstance(t, FunctionTest)]
        file = self.run.spec.files[0]
        if file not in self.present:
            why = self.refused.get(file, f"{file} is missing from the submission")
            for test in tests:
                self.outcomes[test.name] = self.run.pending(test, why)
            self.write()
            return
        cases = [[test.draw(inputs.generator(self.run.seed, test.name, c)) for c in range(test.cases)]
                 for test in tests]
        values: dict[int, dict] = {}
        load_error = []

        def on_message(header, _):
            if "load_error" in header:
                load_error.append(header["load_error"])
            else:                                       # a case's value or error
                values.setdefault(header["test"], {})[header["case"]] = header

        job = {"kind": "functions", "folder": str(self.scratch / "submission"), "file": file,
               "exercise": str(self.run.exercise),
               "tests": [{"name": t.name, "cases": c} for t, c in zip(tests, cases)]}
        ended = drive(self, job, len(tests), on_message, None, 1 << 22, self.run.test_time_limit)
        for t, test in enumerate(tests):
            if load_error:
                self.outcomes[test.name] = self.run.pending(test, f"{file} could not be loaded: {load_error[0]}")
                continue
            if t in ended and voided(ended[t]):
                self.outcomes[test.name] = self.run.pending(test, ended[t])
                continue
            outcome = judge_function(test, cases[t], values.get(t, {}), self.run.checks,
                                     self.run.checks.UNITS.get(test.name, ""))
            if t in ended:
                outcome.output += f"\nstopped: {ended[t]}"
            self.outcomes[test.name] = [outcome]
        self.write()

    def grade(self) -> list[Outcome]:
        try:
            if any(isinstance(t, GemmTest) for t in self.tests()):
                self.grade_gemm()
            elif any(isinstance(t, OpTest) for t in self.tests()):
                op_grading.grade(self)                  # another operation's kernel file
            else:
                self.grade_functions()
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)
        self.write()
        return self.outcomes_now()


def _smaller(gpu: Outcome, cpu: Outcome) -> Outcome:
    """One class judged on the GPU and on the cpu backend: the smaller share, both reports."""
    return Outcome(gpu.name, gpu.max_score, min(gpu.score, cpu.score),
                   f"on the GPU:\n{gpu.output}\n\non the cpu backend, where a race, an unreached barrier, "
                   f"unwritten shared memory or a read past the inputs shows on every run:\n{cpu.output}")

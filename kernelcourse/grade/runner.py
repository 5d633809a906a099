"""One submission through the grader, and a folder of them with JOBS workers.

For one submission: its files are copied into a fresh scratch folder (the submissions
folder is only ever read, here), each file is held to the static checks, and then its
tests run in children (sandbox.py), one job at a time; on a GPU a C file runs on the GPU
and on the cpu backend, and each class takes the smaller share (Submission._correctness). A test that hangs or crashes its
child costs that test: the child is killed, the test scored with what had arrived, and a
fresh child carries on with the tests after it. results.json is rewritten after each job,
so a run cut short still leaves what was graded.

With JOBS workers, submissions are graded in parallel, one GPU per worker where there
are GPUs. Correctness runs in parallel; timing never does: a timed run has its GPU to
itself (GpuGate), so that timings are not distorted by a neighbour's kernels.
"""
from __future__ import annotations

import json
import queue
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import inputs, perf, report, static
from .channel import ChannelClosed, ChannelError, ChannelTimeout, array_of
from .judge import Outcome, ShapeRuns, judge_function, judge_gemm
from .sandbox import Child, Isolation, child_environment
from .spec import FunctionTest, GemmTest
from ..verify import TOLERANCE, canary_length

FILE_LIMIT = 1 << 20          # bytes: a submitted file larger than this is not graded
PERF_TIME_LIMIT_S = 300


@dataclass
class Run:
    """One grading run: the exercise, the seed, where things go, what this machine has."""

    exercise: Path
    spec: object                   # the exercise's grading.py
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
    static_checks: bool = True     # off only in the tests that show each later defence alone
    gates: dict = field(default_factory=dict)
    isolation: dict = field(default_factory=dict)

    def __post_init__(self):
        self.test_time_limit = self.test_time_limit or self.spec.TEST_TIME_LIMIT_S
        self.submission_time_limit = self.submission_time_limit or self.spec.TIME_LIMIT_S
        self.scratch_root = Path(tempfile.mkdtemp(prefix="kernelcourse-grade-"))
        self.scratch_root.chmod(0o711)            # children may pass through, never list it
        self.gates = {gpu: GpuGate() for gpu in self.gpus}

    def worker(self, w: int) -> tuple[Isolation, str | None]:
        if w not in self.isolation:
            self.isolation[w] = Isolation.probe(w)
        return self.isolation[w], (self.gpus[w % len(self.gpus)] if self.gpus else None)

    def results_path(self, student: str) -> Path:
        return self.out / "results.json" if self.flat else self.out / student / "results.json"

    def close(self) -> None:
        shutil.rmtree(self.scratch_root, ignore_errors=True)


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
        self.run, self.student, self.folder = run, student, folder
        self.isolation, self.gpu = run.worker(worker)
        self.started = time.monotonic()
        self.deadline = self.started + run.submission_time_limit
        self.scratch = Path(tempfile.mkdtemp(prefix=f"{worker}-", dir=run.scratch_root))
        self.outcomes: dict[str, list[Outcome]] = {}
        self.notes: list[str] = []
        self.present = self._copy_files()
        self.isolation.own(self.scratch)
        self.env = child_environment(self.scratch, self.gpu)

    def _copy_files(self) -> set[str]:
        """The submission's files into scratch/submission (found at any depth, as Gradescope
        may nest them; links and oversized files refused); the names found."""
        target = self.scratch / "submission"
        target.mkdir()
        found = set()
        for name in self.run.spec.FILES:
            candidates = sorted(p for p in self.folder.rglob(name) if p.is_file() and not p.is_symlink())
            if not candidates:
                continue
            if candidates[0].stat().st_size > FILE_LIMIT:
                self.notes.append(f"{name} is larger than {FILE_LIMIT >> 20} MB: not graded")
                continue
            shutil.copyfile(candidates[0], target / name)
            found.add(name)
        for path in [target, *target.iterdir()]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        return found

    def write(self) -> None:
        """results.json as it stands: every test, graded or not yet."""
        outcomes = [o for test in self.tests() for o in self.outcomes.get(self.key(test), self.pending(test))]
        lines = [f"exercise {self.run.exercise.name}, graded {'on a GPU' if self.run.on_gpu else 'on a CPU'}",
                 *self.notes]
        if not self.run.on_gpu and any(getattr(t, "perf_points", 0) for t in self.tests()):
            lines.append("Performance points are graded on a GPU machine by the instructor; "
                         "this run (no GPU) grades correctness only.")
        payload = report.results_json(outcomes, "\n".join(lines), time.monotonic() - self.started,
                                      {"student": self.student, "exercise": self.run.exercise.name})
        report.write_json(self.run.results_path(self.student), payload)

    def tests(self):
        return self.run.spec.TESTS

    @staticmethod
    def key(test) -> str:
        return test.file if isinstance(test, GemmTest) else test.name

    def pending(self, test, why: str = "not graded yet") -> list[Outcome]:
        """A test's outcomes at 0 points, each saying why."""
        if isinstance(test, FunctionTest):
            return [Outcome(f"{test.name}()", test.points, 0.0, why)]
        outcomes = [Outcome(f"{test.file}: {c.title}", test.points[c.name], 0.0, why) for c in test.classes()]
        if test.perf_points:
            outcomes.append(self._perf_outcome(test, 0.0, why))
        return outcomes

    def _perf_outcome(self, test: GemmTest, score: float, why: str) -> Outcome:
        if not self.run.on_gpu:       # listed, worth nothing here: the GPU run grades it
            return Outcome(f"{test.file}: performance", 0.0, 0.0,
                           f"performance ({test.perf_points} points) is graded on a GPU machine")
        return Outcome(f"{test.file}: performance", test.perf_points, score, why)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    # -- children
    def drive(self, job: dict, count: int, on_message, expect_bytes, budget: int,
              time_limit: float) -> dict[int, str]:
        """Run `job` over its `count` tests, restarting after a test that ends its child;
        why each test that did not finish ended. on_message(header, payload) takes the rest."""
        ended: dict[int, str] = {}
        done: set[int] = set()
        first = 0
        while first < count:
            sub = dict(job, tests=job["tests"][first:]) if "tests" in job else job
            log = tempfile.TemporaryFile(dir=self.run.scratch_root)
            child = Child(self.isolation, self.scratch, self.env, log, json.dumps(sub).encode())
            current, started, why, closed = None, False, None, False
            begun: set[int] = set()                     # the tests this child started
            expect = _shifted(expect_bytes, first)
            test_deadline = time.monotonic() + time_limit
            try:
                while True:
                    header, payload = child.receiver.receive(min(test_deadline, self.deadline),
                                                             budget, expect)
                    if isinstance(header.get("test"), int):
                        header["test"] += first
                    if header.get("start"):
                        current, started = header["test"], True
                        begun.add(current)
                        test_deadline = time.monotonic() + time_limit
                    elif header.get("done"):
                        done.add(header["test"])
                        current = None
                    else:
                        on_message(header, payload)
            except ChannelTimeout:
                why = (f"time limit: still running after {time_limit:g} s (an endless loop?)"
                       if time.monotonic() < self.deadline else
                       f"the submission's time limit ({self.run.submission_time_limit:g} s) ran out")
            except ChannelError as exc:
                why = str(exc)
            except ChannelClosed:
                closed = True
            status = child.stop(closed)
            why = why or status
            printed = _tail(log)
            shown = f"\nits last output (ignored for grading):\n{printed}" if printed and "time limit" not in (why or "") else ""
            # A test this child started and never finished, other than the one it was in when it
            # ended, is not run again: a fresh child would only do the same, and so on forever.
            for t in begun - done - {current}:
                ended[t] = "the test ended without a verdict from its process"
            remaining = [t for t in range(first, count) if t not in done and t not in begun]
            if current is not None:
                ended[current] = (why or "the process exited (code 0) in the middle of this test: "
                                         "os._exit(0)?") + shown
            elif not remaining:
                break                                   # every test finished
            elif not started:                           # it ended while loading
                for t in remaining:
                    ended[t] = f"did not load: {why or 'the process ended without a word'}{shown}"
                break
            if self.remaining() <= 0:
                for t in remaining:
                    ended[t] = "not run: the submission's time limit ran out"
                break
            if not remaining:
                break
            first = remaining[0]                        # a fresh child for the tests left
        return ended

    # -- GEMM exercises
    def grade_gemm(self) -> None:
        tests = [t for t in self.tests() if isinstance(t, GemmTest)]
        runnable = []
        for test in tests:
            why = self._refusal(test)
            if why:
                self.outcomes[test.file] = self.pending(test, why)
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
        """Why the file is not run at all: missing, or refused by the static check."""
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
                self._check_symbols(test)             # every C file also runs on the cpu backend
        except static.Refused as exc:
            return f"static check: {exc}\n(the static check is the defence against a library GEMM; see GRADING.md)"
        return None

    def _check_symbols(self, test: GemmTest) -> None:
        got = {}
        ended = self.drive({"kind": "symbols", "folder": str(self.scratch / "submission"), "file": test.file},
                           1, lambda header, _: got.update(header), None, 1 << 20, self.run.test_time_limit)
        if ended or "compiled" not in got:
            raise static.Refused(f"{test.file}: compiling it alone failed: {ended.get(0, 'no answer')}")
        if got["compiled"]:
            if not isinstance(got.get("symbols"), list) or not all(isinstance(s, str) for s in got["symbols"]):
                raise static.Refused(f"{test.file}: the symbol list did not come back")
            static.check_symbols(got["symbols"], test.file)

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
                outcomes[test.file].append(self._perf_outcome(test, 0.0, why))
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
                    A, B, _ = inputs.gemm_case(seed, test.file, shape, index)
                    names = (folder / f"{t}-{s}-{index}-A.npy", folder / f"{t}-{s}-{index}-B.npy")
                    np.save(names[0], A)
                    np.save(names[1], B)
                    files.append([str(n) for n in names])
                entries.append({"M": shape.M, "N": shape.N, "K": shape.K, "inputs": files,
                                "runs": self._runs(test)})
            # a launch's own limit well inside the test's, so a hang is named as one
            plan.append({"file": test.file, "kind": test.kind, "shapes": entries,
                         "launch_timeout_s": self.run.test_time_limit / 3})
            shapes_of.append((per_class, shapes))
        for path in [folder, *folder.iterdir()]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        got = [{s: ShapeRuns(s) for s in shapes} for _, shapes in shapes_of]
        ran = {}

        def expect(header):
            t, s = header.get("test"), header.get("shape")
            if not (isinstance(t, int) and isinstance(s, int) and 0 <= t < len(tests)
                    and 0 <= s < len(shapes_of[t][1])):
                return None
            shape = shapes_of[t][1][s]
            return 4 * {"C": 2 * canary_length(shape.N) + shape.M * shape.N,
                        "A": shape.M * shape.K, "B": shape.K * shape.N}.get(header.get("what"), 0)

        def on_message(header, payload):
            t = header.get("test")
            if not isinstance(t, int) or not 0 <= t < len(tests):
                raise ChannelError("sent a message about no test")
            if "compile_error" in header or "load_error" in header:
                ran[t] = ("does not compile; the compiler's log:\n" + str(header["compile_error"])
                          if "compile_error" in header else f"could not be loaded: {header['load_error']}")
            elif "ran" in header:
                ran[t] = f"ran on the {header['ran']}"
            elif "shape" in header:
                shape = shapes_of[t][1][header["shape"]]
                record = got[t][shape]
                if "crash" in header:
                    record.crash = str(header["crash"])
                    return
                M, N, K = shape.M, shape.N, shape.K
                size = {"C": (2 * canary_length(N) + M * N,), "A": (M, K), "B": (K, N)}[header["what"]]
                array = array_of(header, payload, "float32", size)
                if header["what"] == "C":
                    record.runs.append([array])
                elif record.runs:
                    record.runs[-1].append(array)

        budget = sum(expect({"test": t, "shape": s, "what": w}) * len(e["runs"])
                     for t, p in enumerate(plan) for s, e in enumerate(p["shapes"]) for w in "CAB") + (1 << 20)
        job = {"kind": "gemm", "folder": str(self.scratch / "submission"), "backend": backend,
               "tests": plan}
        with self.run.gates[self.gpu].shared() if on_gpu else nullcontext():
            ended = self.drive(job, len(tests), on_message, expect, budget, self.run.test_time_limit)
        found = {}
        for t, test in enumerate(tests):
            per_class, shapes = shapes_of[t]
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
                                          lambda s: [inputs.gemm_case(seed, test.file, s, i) for i in range(2)],
                                          self._runs(test), pads, header)
        return found

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
        plan = {"file": test.file, "kind": test.kind, "launch_timeout_s": self.run.test_time_limit}
        job = {"kind": "perf", "folder": str(self.scratch / "submission"), "backend": self.run.c_backend,
               "test": plan, "seeds": seeds}
        got = {"outputs": []}

        def on_message(header, payload):
            if "times" in header:
                got["times"] = header["times"]
            elif "repeat" in header:
                got["outputs"].append(array_of(header, payload, "float32", (perf.SIZE, perf.SIZE)))

        expect = lambda header: 4 * perf.SIZE * perf.SIZE if "repeat" in header else None  # noqa: E731
        with self.run.gates[self.gpu].alone():          # nothing else on this GPU meanwhile
            ended = self.drive(job, 1, on_message, expect, 4 * perf.SIZE ** 2 * perf.REPEATS + (1 << 20),
                               PERF_TIME_LIMIT_S)
        times = got.get("times")
        if ended or not _valid_times(times) or len(got["outputs"]) != perf.REPEATS:
            score, line = 0.0, f"the timed run did not complete: {ended.get(0, 'incomplete results')}"
        else:
            score, line = perf.judge(times, got["outputs"], seeds, test.perf_points, TOLERANCE["fp32"])
        outcomes[-1] = self._perf_outcome(test, score, line)

    # -- Python functions
    def grade_functions(self) -> None:
        tests = [t for t in self.tests() if isinstance(t, FunctionTest)]
        file = self.run.spec.FILES[0]
        if file not in self.present:
            for test in tests:
                self.outcomes[test.name] = self.pending(test, f"{file} is missing from the submission")
            self.write()
            return
        cases = [[test.draw(inputs.generator(self.run.seed, test.name, c)) for c in range(test.cases)]
                 for test in tests]
        values: dict[int, dict] = {}
        load_error = []

        def on_message(header, payload):
            if "load_error" in header:
                load_error.append(str(header["load_error"]))
            elif isinstance(header.get("test"), int) and isinstance(header.get("case"), int):
                values.setdefault(header["test"], {})[header["case"]] = header

        job = {"kind": "functions", "folder": str(self.scratch / "submission"), "file": file,
               "tests": [{"name": t.name, "cases": c} for t, c in zip(tests, cases)]}
        ended = self.drive(job, len(tests), on_message, None, 1 << 22, self.run.test_time_limit)
        for t, test in enumerate(tests):
            if load_error:
                self.outcomes[test.name] = self.pending(test, f"{file} could not be loaded: {load_error[0]}")
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
            else:
                self.grade_functions()
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)
        self.write()
        return [o for test in self.tests() for o in self.outcomes.get(self.key(test), self.pending(test))]


def _smaller(gpu: Outcome, cpu: Outcome) -> Outcome:
    """One class judged on the GPU and on the cpu backend: the smaller share, both reports."""
    return Outcome(gpu.name, gpu.max_score, min(gpu.score, cpu.score),
                   f"on the GPU:\n{gpu.output}\n\non the cpu backend, where a race, an unreached barrier, "
                   f"unwritten shared memory or a read past the inputs shows on every run:\n{cpu.output}")


def _shifted(expect_bytes, first: int):
    """expect_bytes for a child that numbers its tests from `first` (a restarted child)."""
    if expect_bytes is None:
        return None
    return lambda header: expect_bytes(dict(header, test=header["test"] + first)
                                       if isinstance(header.get("test"), int) else header)


def _tail(log, limit: int = 1500) -> str:
    log.seek(0, 2)
    log.seek(max(0, log.tell() - limit))
    text = log.read().decode(errors="replace").strip()
    log.close()
    return text


def _valid_times(times) -> bool:
    return (isinstance(times, dict) and all(
        isinstance(times.get(k), list) and len(times[k]) == perf.REPEATS
        and all(isinstance(x, (int, float)) and x > 0 for x in times[k]) for k in ("submission", "reference")))


# ------------------------------------------------------------------------------ a folder

PROBE_TIME_LIMIT_S = 300


def probe(run: Run, progress=print) -> None:
    """On a GPU, before any submission: the course's reference kernels in a child confined
    as a submission's is (worker 0's uid, Landlock, no network), stage by stage, with the
    seconds each took. A stage that fails or never ends stops the run, named, with the
    child's last output: no class is graded on a machine whose sandbox cannot run a kernel."""
    empty = Path(tempfile.mkdtemp(dir=run.scratch_root))
    probing = Submission(run, "probe", empty, 0)
    stages = []
    ended = probing.drive({"kind": "probe", "backend": run.c_backend, "tests": [{}]}, 1,
                          lambda header, _: stages.append(header), None, 1 << 16, PROBE_TIME_LIMIT_S)
    for s in stages:
        progress(f"  probe: {s['stage']} ({s['seconds']:g} s)")
    if ended:
        reached = stages[-1]["stage"] if stages else "nothing (the child did not start a stage)"
        raise RuntimeError(f"the sandboxed probe of the GPU did not finish; last stage reached: "
                           f"{reached}; {ended[0]}")


def grade_folder(run: Run, submissions: Path, jobs: int, only: str | None = None,
                 progress=print) -> list[tuple[str, list[Outcome]]]:
    """Every student's folder (or only one), JOBS at a time; their rows, in name order."""
    students = sorted(d.name for d in submissions.iterdir() if d.is_dir() and not d.is_symlink())
    if only is not None:
        students = [s for s in students if s == only]
    workers: queue.Queue = queue.Queue()
    for w in range(jobs):
        workers.put(w)

    def one(student: str):
        w = workers.get()
        try:
            started = time.monotonic()
            outcomes = Submission(run, student, submissions / student, w).grade()
            total = sum(o.score for o in outcomes)
            progress(f"  {student:24} {total:6.2f} / {sum(o.max_score for o in outcomes):g}"
                     f"   ({time.monotonic() - started:.1f} s, worker {w})")
            return student, outcomes
        finally:
            workers.put(w)

    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(one, students))


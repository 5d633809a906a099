"""The folders of submissions the grader's tests grade, as {student: {file name: text}}.

tests/test_grade.py grades them on the CPU; scripts/gpu_checks.sh (steps grade and grade-04)
writes the exercise 01 (or 04) folder and grades it on a GPU, with performance points:

    python tests/grading/submissions.py 01 DIR

and the helpers the grader's tests share: make() a student's folder of any bytes, find the
processes_with() a marker (none may survive a run), read a test file's header(), take a
folder's snapshot() and validate() a results.json.
"""
import hashlib
import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
CHEATS = TESTS / "grading"
VARIANTS_03 = sorted((TESTS / "exercises" / "03").glob("*.py"))
SOLUTIONS = {"01": REPO / "solutions" / "01-tiled-matmul", "03": REPO / "solutions" / "03-intensity-math",
             "04": REPO / "solutions" / "04-hopper-pipeline"}
SEED = "20250117"      # GRADE_SEED of the grader's tests: fixed, so exercise 03's known mistakes show
sys.path.insert(0, str(TESTS))
import exercise_variants as variants  # noqa: E402
from kernelcourse.check import exercise_spec  # noqa: E402


def graded_files(exercise: str) -> tuple[str, ...]:
    """The files a submission of `exercise` holds: its spec.py's FILES."""
    return exercise_spec(REPO / "exercises" / SOLUTIONS[exercise].name).FILES


def honest(exercise: str, *names: str) -> dict:
    """One student's files, the course's solution of `exercise`: every graded file, or `names`."""
    return {n: (SOLUTIONS[exercise] / n).read_text() for n in names or graded_files(exercise)}


def exercise_01() -> dict:
    """The solution, the stub, a missing file, each known-wrong variant, and each file of
    grading/01 (robustness cases and cheats)."""
    solution, stub = SOLUTIONS["01"], REPO / "exercises" / "01-tiled-matmul"
    students = {"solution": honest("01"),
                "stub": {n: (stub / n).read_text() for n in graded_files("01")},
                "missing_file": honest("01", "tiled.cu")}
    for v in variants.EXERCISE_01:
        students[f"variant_{v.name}"] = {v.file: v.apply((solution / v.file).read_text())}
    # A file that does not compile beside one that is right: the one must not cost the other
    # (nor make the grader run the good one again and again).
    broken = next(v for v in variants.EXERCISE_01 if v.name == "compile_error")
    students["compile_error_beside_its_twin"] = {
        "tiled.cu": broken.apply((solution / "tiled.cu").read_text()),
        "tiled_triton.py": (solution / "tiled_triton.py").read_text()}
    for cheat in sorted((CHEATS / "01").iterdir()):
        name = "tiled.cu" if cheat.suffix == ".cu" else "tiled_triton.py"
        students[f"cheat_{cheat.stem}"] = {name: cheat.read_text()}
    return students


def exercise_02() -> dict:
    shipped = (REPO / "exercises" / "02-ragged-dims" / "tiled_faulty.cu").read_text()
    students = {"shipped": {"tiled_faulty.cu": shipped},
                "solution": {"tiled_faulty.cu": (REPO / "solutions" / "02-ragged-dims" / "tiled_faulty.cu").read_text()}}
    for v in variants.EXERCISE_02:
        students[f"variant_{v.name}"] = {v.file: v.apply(shipped)}
    return students


def exercise_03() -> dict:
    solved = honest("03")["intensity.py"]
    students = {"solution": {"intensity.py": solved},
                "stub": {"intensity.py": (REPO / "exercises" / "03-intensity-math" / "intensity.py").read_text()},
                "missing_file": {"notes.txt": "I forgot to upload it"}}
    for v in VARIANTS_03:
        students[f"variant_{v.stem}"] = {"intensity.py": solved + "\n\n" + v.read_text()}
    for cheat in sorted((CHEATS / "03").glob("*.py")):
        students[f"cheat_{cheat.stem}"] = {"intensity.py": cheat.read_text()}
    return students


def exercise_04() -> dict:
    """The solution, the stub and a few of the known-wrong pipelines: a deadlock, a stage read
    before its copy landed, a copy into a stage still read, a box at the wrong corner."""
    solved = honest("04")["pipeline.cu"]
    students = {"solution": {"pipeline.cu": solved},
                "stub": {"pipeline.cu": (REPO / "exercises" / "04-hopper-pipeline" / "pipeline.cu").read_text()}}
    for v in variants.EXERCISE_04:
        if v.name in GRADED_04:
            students[f"variant_{v.name}"] = {v.file: v.apply(solved)}
    for name, edits, _ in CHEATS_04:
        students[f"cheat_{name}"] = {"pipeline.cu": variants.Variant(name, "pipeline.cu", "cheat", "", edits).apply(solved)}
    return students


GRADED_04 = ("never_released", "full_parity_flipped", "released_before_retired", "a_box_at_the_wrong_corner")
INCLUDES = '#include "portable.h"\n#include "mma.h"\n#include "hopper.h"\n'
RELEASE_FIRST = (variants.RETIRE_04 + variants.RELEASE_04, variants.RELEASE_04 + variants.RETIRE_04)
# Exercise 04's cheats, as edits of the solution: (name, the edits, what its report must say).
# Each scores 0. The first two change the course headers' code from the student's file, where
# no rule of the kernel's own lines reads: macros defined before the headers mute the
# emulation's refusals (a stage released before its wgmma retired then passes) or place inline
# assembly in a header's line; the third takes __shared__'s meaning away (no NaN-filled shared
# memory); the fourth names a function the C runtime's start-up code calls when the library
# is loaded.
CHEATS_04 = (
    ("mutes_the_emulation", ((INCLUDES, '#define noreturn\n#define stop(text) ((void)(text))\n' + INCLUDES),
                             RELEASE_FIRST), "has #define before its last #include"),
    ("asm_in_a_header", ((INCLUDES, '#include "portable.h"\n#include "mma.h"\n#define memcpy(d, s, n) '
                          '({ __CONCAT(__as,m__) volatile("nop"); __builtin_memcpy(d, s, n); })\n'
                          '#include "hopper.h"\n#undef memcpy\n'),), "has #define before its last #include"),
    ("undefines_shared", ((INCLUDES, INCLUDES + "#undef __shared__\n#define __shared__ static\n"),),
     "has a #undef of __shared__"),
    ("gmon_start", ((INCLUDES, INCLUDES + 'extern "C" void __gmon_start__(void) {}\n'),),
     "runs code when it is loaded or unloaded (__gmon_start__)"),
    # After the headers, a macro named for a word of theirs changes their macros where those
    # expand in the file: __shared__'s retain attribute (no NaN-filled shared memory, no
    # guard), KC_DYNAMIC_SHARED's kc::dynamic_shared (any buffer as the dynamic shared memory).
    ("unretains_shared", ((INCLUDES, INCLUDES + "#define retain used\n"),),
     "has a #define of retain, a name the course headers use"),
    ("redirects_dynamic_shared", ((INCLUDES, INCLUDES + "#define dynamic_shared dynamic_shared\n"),),
     "has a #define of dynamic_shared, a name the course headers use"),
)
FOLDERS = {"01": exercise_01, "02": exercise_02, "03": exercise_03, "04": exercise_04}


def graded_without_static_checks(tmp: Path, file: str, cheats: dict) -> dict:
    """{name: text} of one exercise-01 file, beside the solution's, graded once in-process with
    the static check off (each later layer alone): {student: (outcomes, results.json's text)}."""
    from kernelcourse.grade import classroom
    from kernelcourse.grade.__main__ import make_run
    students = {name: {file: text} for name, text in cheats.items()}
    students["solution"] = {file: (REPO / "solutions" / "01-tiled-matmul" / file).read_text()}
    write(tmp / "subs", students)
    run = make_run(REPO / "exercises" / "01-tiled-matmul", tmp / "out", test_time_limit=60)
    run.static_checks = False
    try:
        rows = classroom.grade_folder(run, tmp / "subs", 2, progress=lambda line: None)
    finally:
        run.close()
    return {row.student: (row.outcomes, run.layout.results(row.student).read_text()) for row in rows}


def write(folder: Path, students: dict) -> None:
    for student, files in students.items():
        (folder / student).mkdir(parents=True)
        for name, text in files.items():
            (folder / student / name).write_text(text)


def make(folder: Path, files: dict) -> None:
    """A student's folder: {relative path (str or bytes): text or bytes}."""
    for name, content in files.items():
        path = os.path.join(os.fsencode(folder), os.fsencode(name))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content.encode() if isinstance(content, str) else content)


def header(path: Path, key: str) -> list[str]:
    """What a file's `# key: ...` (or `// key: ...`) header lines say: its expectations."""
    marks = ("# ", "// ")
    return [line.split(":", 1)[1].strip() for line in path.read_text().splitlines()
            if line.startswith(tuple(f"{m}{key}:" for m in marks))]


def snapshot(folder: Path) -> dict:
    """Every path under `folder`, with the hash of each file's bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*"))}


def validate(result: dict) -> None:
    """Gradescope's results.json schema (jsonschema is a dev dependency: make setup has it)."""
    import jsonschema

    from kernelcourse.grade import report
    jsonschema.validate(result, report.SCHEMA)


def processes_with(marker: bytes) -> list[int]:
    """The live processes whose command line, environment or working folder holds `marker`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            held = Path(f"/proc/{pid}/cmdline").read_bytes() + Path(f"/proc/{pid}/environ").read_bytes()
            held += os.fsencode(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            continue
        if marker in held:
            found.append(int(pid))
    return found


if __name__ == "__main__":
    write(Path(sys.argv[2]), FOLDERS[sys.argv[1]]())

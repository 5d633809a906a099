"""Every exercise's folder: what it declares once (spec.py), which the check and the grader
both read; its solved twin, which holds the solved files and the answers, and nothing else;
and its notebook, run as Jupyter runs it, on the files as shipped and, pointed at them, on
the solution's (the solution has no notebook of its own).
"""
from pathlib import Path

import pytest

from kernelcourse import check
from test_exercises import REPO, snapshot

pytestmark = [pytest.mark.check]

EXERCISES = sorted(p for p in (REPO / "exercises").iterdir() if (p / "spec.py").is_file())
# The check's last line as each notebook prints it: on the files as shipped, on the solution's.
NOTEBOOK_SAYS = {
    "00-shared-transpose": ("FAIL: 0 of 1 right, 0 wrong, 1 not written yet. Next: transpose_shared.cu.",
                            "PASS: transpose_shared.cu gives out = in^T on every size of the suite"),
    "01-tiled-matmul": ("FAIL: 0 of 2 right, 0 wrong, 2 not written yet. Next: tiled.cu.",
                        "PASS: tiled.cu and tiled_triton.py give C = A @ B on every shape of the suite"),
    "02-ragged-dims": ("FAIL: 0 of 1 right, 1 wrong, 0 not written yet. Next: tiled_faulty.cu.",
                       "PASS: tiled_faulty.cu gives C = A @ B on all three shapes"),
    "03-intensity-math": ("FAIL: 0 of 10 right, 0 wrong, 10 not written yet. Next: gemm_flops.",
                          "PASS: all 10 functions right"),
    "04-hopper-pipeline": ("FAIL: 0 of 1 right, 0 wrong, 1 not written yet. Next: pipeline.cu.",
                           "PASS: pipeline.cu gives C = A @ B on every shape TMA describes"),
}


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda p: p.name)
def test_the_files_are_declared_once_and_the_check_and_the_grader_name_no_other(exercise):
    from kernelcourse.grade import spec
    files = check.exercise_spec(exercise).FILES
    assert all((exercise / name).is_file() for name in files), files
    grading = spec.load(exercise)
    assert grading.files == files
    named = {t.file for t in grading.tests if isinstance(t, (spec.GemmTest, spec.OpTest))}
    checks = check.description(exercise)
    if getattr(checks, "NOUN", "function") == "file":         # its cases are the files themselves
        named |= {case.name for case in checks.CASES}
    assert named <= set(files), named


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda p: p.name)
def test_the_solution_folder_holds_the_solved_files_and_its_readme_only(exercise):
    solution = REPO / "solutions" / exercise.name
    held = sorted(p.name for p in solution.iterdir() if p.name != "__pycache__")
    assert held == sorted(("README.md", *check.exercise_spec(exercise).FILES)), held


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda p: p.name)
def test_the_notebook_matches_its_script(exercise):
    jupytext = pytest.importorskip("jupytext", reason="jupytext is a dev dependency (make setup installs it)")
    notebook, script = jupytext.read(exercise / "exercise.ipynb"), jupytext.read(exercise / "exercise.py")
    cells = lambda nb: [(c.cell_type, c.source.strip()) for c in nb.cells if c.source.strip()]  # noqa: E731
    assert cells(notebook) == cells(script), (
        f"{exercise.name}/exercise.ipynb differs from exercise.py: regenerate it with "
        f".venv/bin/python -m jupytext --quiet --update --to ipynb {exercise.relative_to(REPO)}/exercise.py")
    assert not [c for c in notebook.cells if c.get("outputs")], "commit notebooks without outputs"


def run_notebook(exercise: Path, files: Path, monkeypatch) -> str:
    """The exercise's notebook run as Jupyter runs it (a kernel, in the notebook's folder) on
    the files in `files`: what its cells printed. A cell that raises fails the test."""
    nbformat = pytest.importorskip("nbformat", reason="nbformat is a dev dependency (make setup installs it)")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is a dev dependency (make setup installs it)")
    if files == exercise:
        monkeypatch.delenv(check.FILES_VAR, raising=False)
    else:
        monkeypatch.setenv(check.FILES_VAR, str(files))
    notebook = nbformat.read(exercise / "exercise.ipynb", as_version=4)
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(exercise)}}).execute()
    return "".join(out["text"] for cell in notebook.cells for out in cell.get("outputs", ())
                   if out["output_type"] == "stream" and out["name"] == "stdout")


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda p: p.name)
@pytest.mark.parametrize("on", ["stub", "solution"])
def test_the_notebook_runs_on_the_files_as_shipped_and_on_the_solutions(exercise, on, monkeypatch):
    files = exercise if on == "stub" else REPO / "solutions" / exercise.name
    before = snapshot(files)
    printed = run_notebook(exercise, files, monkeypatch)
    assert f"Checking {files.relative_to(REPO)}/" in printed, printed
    assert printed.rstrip().splitlines()[-1].startswith(NOTEBOOK_SAYS[exercise.name][on == "solution"]), printed
    assert snapshot(files) == before, "the notebook changed the folder whose files it ran"

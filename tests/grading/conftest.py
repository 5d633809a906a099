"""What the grader's tests share as fixtures."""
import pytest

from grading.submissions import REPO, SEED
from kernelcourse.grade.__main__ import make_run


@pytest.fixture
def run_of(tmp_path, monkeypatch):
    """An in-process run of an exercise (the grader's parent side, here), closed after."""
    monkeypatch.setenv("GRADE_SEED", SEED)
    runs = []

    def start(exercise: str):
        runs.append(make_run(next((REPO / "exercises").glob(f"{exercise}-*")), tmp_path / "out", test_time_limit=20))
        return runs[-1]
    yield start
    for run in runs:
        run.close()

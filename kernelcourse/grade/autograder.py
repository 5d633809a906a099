"""`python -m kernelcourse.grade.autograder NN [--out ZIP]`: the zip Gradescope runs (make autograder).

At its root, as Gradescope's specification asks: setup.sh (run once, as root, when the
image is built), run_autograder (run for each submission), requirements.txt (the packages,
pinned to the versions this repository is tested with; torch as the CPU build), and the
grader with the whole harness it needs: kernelcourse/, every exercise's spec.py, checks.py
and grading.py, and the labs' kernels with the rungs.py that declare them (the rung
registry's reference kernels) and lab 00's lab_kernels.py (its OpTest's kernels).
EXERCISE names the exercise graded.
"""
from __future__ import annotations

import argparse
import zipfile
from importlib import metadata
from pathlib import Path

from ..check import REPO, find_exercise

TEMPLATES = Path(__file__).resolve().parent / "gradescope"
PINNED = ("numpy", "torch", "triton", "pyseccomp")
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def requirements() -> str:
    lines = [f"--extra-index-url {TORCH_CPU_INDEX}"]
    for package in PINNED:
        version = metadata.version(package)
        if package == "torch" and "+" not in version:
            version += "+cpu"              # Gradescope has no GPU: never the CUDA build
        lines.append(f"{package}=={version}")
    return "\n".join(lines) + "\n"


def harness_files() -> list[Path]:
    """Every file of the harness the grader imports or reads, relative to the repository."""
    package = [p for p in (REPO / "kernelcourse").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".h")]
    exercises = [p for name in ("spec.py", "checks.py", "grading.py")
                 for p in (REPO / "exercises").glob(f"*/{name}")]
    labs = [p for pattern in ("*/*.cu", "*/*_triton.py", "*/rungs.py", "*/lab_kernels.py")
            for p in (REPO / "labs").glob(pattern)]
    return sorted(p.relative_to(REPO) for p in package + exercises + labs)


def build(exercise: Path, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for script in ("setup.sh", "run_autograder"):
            info = zipfile.ZipInfo(script)
            info.external_attr = 0o755 << 16         # executable once unzipped
            z.writestr(info, (TEMPLATES / script).read_text())
        z.writestr("requirements.txt", requirements())
        z.writestr("EXERCISE", exercise.name[:2] + "\n")
        for path in harness_files():
            z.write(REPO / path, str(path))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelcourse.grade.autograder")
    parser.add_argument("exercise", help="its number: 01")
    parser.add_argument("--out", type=Path, help="the zip (default build/autograder-NN.zip)")
    args = parser.parse_args(argv)
    exercise = find_exercise(args.exercise)
    if exercise is None or not (exercise / "grading.py").is_file():
        raise SystemExit(f"no exercise {args.exercise!r} has a grading.py")
    out = build(exercise, args.out or REPO / "build" / f"autograder-{exercise.name[:2]}.zip")
    print(f"{out}: upload it as the assignment's autograder (GRADING.md, Gradescope)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

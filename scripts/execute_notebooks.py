"""The lab notebooks executed on a GPU, outputs and plots kept: results/notebooks/<lab>.ipynb,
what the course's site shows (scripts/gpu_checks.sh's step `notebooks` runs this).

    python scripts/execute_notebooks.py [--out DIR] [--timeout SECONDS] [LAB ...]
    python scripts/execute_notebooks.py --markdown [LAB ...]

--markdown needs no GPU: after an edit to a lab's prose only, it gives each executed notebook
the Markdown cells of its lab.ipynb as they are now, and refuses a notebook whose code cells
changed (that one must run again on a GPU).

LAB: a lab's folder name or number ('04-ladder', '04'); every lab by default. Each
labs/NN-name/lab.ipynb, as `make sync-notebooks` writes it from lab.py (read as committed:
nothing is regenerated, so the GPU machine needs no jupytext), runs top to bottom in a fresh
Jupyter kernel, in the lab's own folder, at the lab's GPU size (KC_BACKEND and KC_SIZE are
unset), each cell under a time limit. Three things are added, none to a cell's source:
  * the first output of the first code cell says where, when and with what it ran: the
    device, the date and the package versions (bench.environment()), also kept in the
    notebook's metadata under "kernelcourse";
  * the course's folder on the machine that ran it is written "." in every output;
  * what the run saves goes to a scratch folder (KC_RESULTS, under build/), never to
    results/: the committed measurements stay the ones the documents quote.
A notebook whose cell fails is written all the same, its error in that cell, and the script
exits with status 1 naming it. Without a GPU a notebook runs (the script's own test does
that) but is never written into results/, which holds GPU measurements only.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))                # the harness, without installing it

from kernelcourse import bench  # noqa: E402
from kernelcourse.device import detect  # noqa: E402

LABS = ROOT / "labs"
EXECUTED = ROOT / "results" / "notebooks"    # where the site reads them
SCRATCH = ROOT / "build" / "notebook-results"
CELL_TIMEOUT = 480                           # seconds; lab 05's whole autotuned plan is one cell
METADATA_KEY = "kernelcourse"


def lab_folders(wanted: list[str] | None = None) -> list[Path]:
    """labs/NN-name/ of every lab with a notebook, or those `wanted` names (folder or number);
    an unknown name stops with the list of labs."""
    folders = sorted(p.parent for p in LABS.glob("[0-9][0-9]-*/lab.ipynb"))
    if not wanted:
        return folders
    chosen = []
    for name in wanted:
        match = [f for f in folders if f.name == name or f.name[:2] == name.zfill(2)]
        if not match:
            raise SystemExit(f"no lab {name!r}: choose from {', '.join(f.name for f in folders)}")
        chosen += match
    return chosen


def provenance(env: dict) -> str:
    """The first output: the device, the date and the versions."""
    device = env.get("device", {})
    gpu = f"{device.get('name', 'no GPU')} ({device.get('arch') or 'CPU'}, " \
          f"{device.get('multiprocessors', 0)} multiprocessors)"
    versions = ", ".join(f"{k} {v}" for k, v in {"python": env["python"], **env["versions"]}.items())
    return (f"Executed on {gpu}, {env['date']}, by scripts/execute_notebooks.py: {versions}. "
            f"Paths are shown from the course's folder; what the run saved went to a scratch "
            f"folder, not to results/.\n")


def environment(device=None) -> dict:
    """bench.environment() (the date, now, and the versions) with the device (detect()'s)."""
    device = device or detect()
    env = bench.environment()
    env["device"] = {"vendor": device.vendor, "name": device.name, "arch": device.arch,
                     "multiprocessors": device.multiprocessors}
    return env


def with_course_paths(notebook, root: Path = ROOT):
    """Every text output with the course's folder on this machine written '.'."""
    here = str(root)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = output["text"].replace(here + os.sep, "").replace(here, ".")
            for kind, data in output.get("data", {}).items():
                if kind.startswith("text/") and isinstance(data, str):
                    output["data"][kind] = data.replace(here + os.sep, "").replace(here, ".")
    return notebook


def execute(folder: Path, timeout: int = CELL_TIMEOUT, device=None):
    """labs/<folder>/lab.ipynb run in a fresh kernel in its folder: (the executed notebook,
    the error that stopped it or None)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    notebook = nbformat.read(folder / "lab.ipynb", as_version=4)
    scratch = SCRATCH / folder.name
    scratch.mkdir(parents=True, exist_ok=True)
    kernel_env = {k: v for k, v in os.environ.items() if k not in ("KC_BACKEND", "KC_SIZE")}
    kernel_env["KC_RESULTS"] = str(scratch)
    kernel_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": str(folder)}})
    error, env = None, environment(device)
    try:
        client.execute(env=kernel_env)
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
        error = exc
    first = next(c for c in notebook.cells if c.cell_type == "code")
    first.outputs.insert(0, nbformat.v4.new_output("stream", name="stdout", text=provenance(env)))
    notebook.metadata[METADATA_KEY] = {"executed": env}
    return with_course_paths(notebook), error


def take_markdown(executed, current) -> int:
    """`executed` with the Markdown cells of `current` (the lab's notebook now), its code cells
    and their outputs untouched; how many changed. ValueError where the code differs."""
    kinds = [c.cell_type for c in executed.cells], [c.cell_type for c in current.cells]
    if kinds[0] != kinds[1] or any(a.source != b.source for a, b in zip(executed.cells, current.cells)
                                   if a.cell_type == "code"):
        raise ValueError("its code cells are not the lab's any more: execute it again on a GPU")
    changed = 0
    for cell, now in zip(executed.cells, current.cells):
        if cell.cell_type == "markdown" and cell.source != now.source:
            cell.source, changed = now.source, changed + 1
    return changed


def markdown_only(folders: list[Path], out: Path) -> int:
    import nbformat
    refused = []
    for folder in folders:
        path = out / f"{folder.name}.ipynb"
        if not path.exists():
            continue
        executed = nbformat.read(path, as_version=4)
        try:
            changed = take_markdown(executed, nbformat.read(folder / "lab.ipynb", as_version=4))
        except ValueError as why:
            print(f"{folder.name}: {why}")
            refused.append(folder.name)
            continue
        nbformat.write(executed, path)
        print(f"{folder.name}: {changed} Markdown cell(s) taken from lab.ipynb")
    return 1 if refused else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("labs", nargs="*", help="lab folders or numbers (default: every lab)")
    parser.add_argument("--out", type=Path, default=EXECUTED, help="where the notebooks go")
    parser.add_argument("--timeout", type=int, default=CELL_TIMEOUT, help="seconds per cell")
    parser.add_argument("--markdown", action="store_true",
                        help="no GPU: take the labs' Markdown cells into the executed notebooks")
    args = parser.parse_args(argv)
    folders = lab_folders(args.labs)
    if args.markdown:
        return markdown_only(folders, args.out.resolve())
    missing = [m for m in ("nbformat", "nbclient", "ipykernel") if importlib.util.find_spec(m) is None]
    if missing:
        raise SystemExit(f"{', '.join(missing)} not installed for {sys.executable}: make setup installs "
                         "them (dev tools); on a GPU machine with no index, scripts/gpu_checks.sh's step "
                         "notebooks installs them from build/notebook-wheels/")
    device = detect()
    out = args.out.resolve()
    if not device.is_gpu and out.is_relative_to(ROOT / "results"):
        raise SystemExit(f"no GPU here: {out.relative_to(ROOT)} holds notebooks executed on a GPU "
                         "only (--out elsewhere runs them here)")
    import nbformat
    out.mkdir(parents=True, exist_ok=True)
    failed = []
    for folder in folders:
        began = time.monotonic()
        notebook, error = execute(folder, args.timeout, device)
        nbformat.write(notebook, out / f"{folder.name}.ipynb")
        shown = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
        verdict = "ok" if error is None else f"FAILED: {str(error).strip().splitlines()[-1]}"
        print(f"{folder.name}: {time.monotonic() - began:.0f} s, {shown / (folder.name + '.ipynb')}: {verdict}",
              flush=True)
        if error is not None:
            failed.append(folder.name)
    if failed:
        print(f"failed: {', '.join(failed)} (each written with its error in the failing cell)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""The lab notebooks executed on a GPU (results/notebooks/, what the site shows) are the labs as
they are: the cells `make sync-notebooks` makes from each lab.py, each cell that prints with
its output, a plot where the lab draws one, and a first output that names the GPU, the date
and the versions. scripts/execute_notebooks.py writes them (gpu_checks.sh's step
`notebooks`); every lab has one."""
import json
import os
import re
import subprocess
import sys

import pytest

import execute_notebooks as executor

pytestmark = [pytest.mark.notebooks]

jupytext = pytest.importorskip("jupytext", reason="jupytext is a dev dependency (make setup installs it)")
nbformat = pytest.importorskip("nbformat", reason="nbformat is a dev dependency (make setup installs it)")

LABS = executor.lab_folders()
COMMITTED = sorted(executor.EXECUTED.glob("*.ipynb"))
PRINTS = re.compile(r"\bprint\(|\bshow\(")         # a cell that prints (or draws) has output


def cells(notebook) -> list[tuple[str, str]]:
    """The notebook's cells as test_notebooks.py compares them: kind and source."""
    return [(c.cell_type, c.source.strip()) for c in notebook.cells if c.source.strip()]


def text_of(output) -> str:
    return output.get("text") or "".join(v for k, v in output.get("data", {}).items()
                                         if k.startswith("text/") and isinstance(v, str))


def problems(executed, folder, on_gpu: bool = True) -> list[str]:
    """What is wrong with `executed` as the executed notebook of labs/<folder>/."""
    script = folder / "lab.py"
    found = []
    if cells(executed) != cells(jupytext.read(script)):
        found.append(f"its cells are not {script.name}'s (make sync-notebooks, then execute again; "
                     "if only Markdown changed: python scripts/execute_notebooks.py --markdown)")
    code = [c for c in executed.cells if c.cell_type == "code"]
    for i, cell in enumerate(code):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if errors:
            found.append(f"code cell {i} failed: {errors[0].ename}: {errors[0].evalue}")
        elif PRINTS.search(cell.source) and not cell.outputs:
            found.append(f"code cell {i} prints but has no output: {cell.source.splitlines()[0]!r}")
    images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
    if "lab.show(" in script.read_text() and on_gpu and not images:
        found.append("the lab draws a figure (lab.show) and the notebook holds no image")
    env = executed.metadata.get(executor.METADATA_KEY, {}).get("executed", {})
    first = text_of(code[0].outputs[0]) if code and code[0].outputs else ""
    device = env.get("device", {})
    if not first.startswith("Executed on") or device.get("name", "?") not in first:
        found.append(f"the first output does not name the device it ran on: {first[:120]!r}")
    if not env.get("date") or not env.get("versions") or env["date"][:10] not in first:
        found.append("no date or versions in the first output and the metadata")
    if on_gpu and device.get("vendor") not in ("nvidia", "amd"):
        found.append(f"not executed on a GPU: {device}")
    return found


def test_the_step_executes_every_lab():
    """gpu_checks.sh's step `notebooks`, one of its default steps, runs the script into
    results/notebooks naming no lab (notebooks:05,07 names some), and with no lab named the
    script runs every lab with a notebook."""
    script = (executor.ROOT / "scripts" / "gpu_checks.sh").read_text()
    defaults = re.search(r"^steps=\$\{\*:-([^}]*)\}", script, re.M)
    assert defaults and "notebooks" in defaults[1].split(), "notebooks is not a default step"
    step = re.search(r"^\s*notebooks\|notebooks:\*\)(.*?);;", script, re.S | re.M)
    assert step, "scripts/gpu_checks.sh has no step notebooks"
    call = step[1].strip().splitlines()[-1].strip()
    assert call == '"$py" scripts/execute_notebooks.py --out results/notebooks "${labs[@]}"', call
    assert [f / "lab.ipynb" for f in executor.lab_folders([])] == sorted(executor.ROOT.glob("labs/*/lab.ipynb"))
    assert len(LABS) >= 8


def test_every_lab_has_its_executed_notebook():
    missing = {f.name for f in LABS} - {p.stem for p in COMMITTED}
    assert not missing, (f"results/notebooks/ lacks {sorted(missing)}: scripts/gpu_checks.sh OUT "
                         f"notebooks:{','.join(sorted(m[:2] for m in missing))} on a GPU machine")
    stray = {p.stem for p in COMMITTED} - {f.name for f in LABS}
    assert not stray, f"results/notebooks/ holds notebooks of no lab: {sorted(stray)}"


@pytest.mark.parametrize("executed", COMMITTED, ids=[p.stem for p in COMMITTED])
def test_an_executed_notebook_is_its_lab_run_on_a_gpu(executed):
    folder = executor.LABS / executed.stem
    found = problems(nbformat.read(executed, as_version=4), folder)
    assert not found, f"{executed.name}:\n  " + "\n  ".join(found)


def test_the_checks_catch_a_notebook_that_drifted_or_lost_its_outputs(tmp_path):
    """The checks above, on lab 01's notebook as committed (no outputs) and altered: each fault
    is named (a checker that passed anything would pass an empty folder too)."""
    folder = executor.LABS / "01-naive"
    notebook = nbformat.read(folder / "lab.ipynb", as_version=4)
    said = "\n".join(problems(notebook, folder))
    assert "first output does not name the device" in said and "prints but has no output" in said
    notebook.cells[-1].source += "\nprint('edited')"
    assert any("cells are not lab.py's" in p for p in problems(notebook, folder))


@pytest.mark.skipif(executor.detect().is_gpu, reason="on a GPU the step itself runs this")
def test_the_script_executes_a_lab_here_and_refuses_to_write_cpu_runs_into_results(tmp_path):
    """Lab 01 executed on this CPU by the script, into a folder of the test's: every check but
    the GPU's passes; results/notebooks/ is refused without a GPU."""
    done = subprocess.run([sys.executable, str(executor.ROOT / "scripts" / "execute_notebooks.py"),
                           "--out", str(tmp_path), "01"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert re.search(r"^01-naive: \d+ s, .*01-naive\.ipynb: ok$", done.stdout, re.M), done.stdout
    executed = nbformat.read(tmp_path / "01-naive.ipynb", as_version=4)
    assert problems(executed, executor.LABS / "01-naive", on_gpu=False) == []
    assert any("not executed on a GPU" in p for p in problems(executed, executor.LABS / "01-naive"))
    said = json.dumps([o for c in executed.cells for o in c.get("outputs", [])])
    assert str(executor.ROOT) not in said                         # the course's folder shown as "."
    refused = subprocess.run([sys.executable, str(executor.ROOT / "scripts" / "execute_notebooks.py"), "01"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "no GPU here" in refused.stderr, refused.stderr


def test_an_unknown_lab_is_named_with_the_list():
    with pytest.raises(SystemExit, match=r"no lab '99': choose from .*01-naive, 02-tiled"):
        executor.lab_folders(["99"])


SAVES = """
from kernelcourse import lab
from kernelcourse.device import Device

class OnAGpu:                      # what LabRun.save asks of a backend on a GPU
    on_gpu, name, label = True, "cuda", "GPU (CUDA events)"
    device = Device("nvidia", "NVIDIA H200", "sm_90", 32, 132)

print(lab.LabRun("auto", 8, OnAGpu(), None).save("probe", {"rows": []}, size=8))
"""


def test_what_an_executed_notebook_saves_goes_to_kc_results_not_results(tmp_path):
    """The executed labs save into the scratch folder KC_RESULTS names (the step sets it), so
    that the committed results/ files stay the ones the documents quote."""
    env = {**os.environ, "KC_RESULTS": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", SAVES], cwd=executor.ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "probe-nvidia-h200-8.json").is_file(), done.stdout
    assert not (executor.ROOT / "results" / "probe-nvidia-h200-8.json").exists()
    assert f"saved {tmp_path / 'probe-nvidia-h200-8.json'}" in done.stdout


def test_markdown_only_takes_the_labs_prose_and_refuses_changed_code(tmp_path):
    """--markdown (no GPU): a prose edit reaches the executed notebook, outputs kept; a code
    edit is refused, and the notebook left as it was."""
    lab = executor.LABS / "01-naive"
    current = nbformat.read(lab / "lab.ipynb", as_version=4)
    executed = nbformat.read(lab / "lab.ipynb", as_version=4)
    code = next(c for c in executed.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="Executed on a GPU\n")]
    prose = next(c for c in executed.cells if c.cell_type == "markdown")
    prose.source = "an older sentence"
    assert executor.take_markdown(executed, current) == 1
    assert prose.source == next(c for c in current.cells if c.cell_type == "markdown").source
    assert code.outputs[0].text == "Executed on a GPU\n"
    assert executor.take_markdown(executed, current) == 0
    code.source += "\nprint('changed')"
    with pytest.raises(ValueError, match="execute it again on a GPU"):
        executor.take_markdown(executed, current)
    out = tmp_path / "notebooks"
    out.mkdir()
    nbformat.write(executed, out / "01-naive.ipynb")
    before = (out / "01-naive.ipynb").read_text()
    assert executor.markdown_only([lab], out) == 1
    assert (out / "01-naive.ipynb").read_text() == before

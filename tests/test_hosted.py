"""A lab notebook opened alone, in a hosted Jupyter (kernelcourse/hosted.py): every lab starts
with the cell that finds or fetches the course, and that cell works where it is run."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcourse import hosted

pytestmark = [pytest.mark.setup]

ROOT = Path(__file__).resolve().parent.parent
LABS = hosted.labs()


def test_every_lab_is_found():
    names = [p.parent.name for p in LABS]
    assert len(names) >= 8 and "04-ladder" in names and "08-hopper" in names


@pytest.mark.parametrize("script", LABS, ids=lambda p: p.parent.name)
def test_every_lab_script_and_notebook_starts_with_the_cell(script):
    """The first code cell of lab.py and of lab.ipynb is hosted.cell(lab), word for word
    (`make sync-notebooks` writes both)."""
    lab = script.parent.name
    assert hosted.first_code_cell(script.read_text()) == hosted.cell(lab)
    notebook = json.loads((script.parent / "lab.ipynb").read_text())
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert "".join(code[0]["source"]) == hosted.cell(lab).removeprefix("# %%\n").rstrip("\n")
    assert notebook["cells"][0]["cell_type"] == "markdown"          # the title stays first


def test_writing_the_cell_twice_changes_nothing_and_replaces_an_older_one():
    script = (ROOT / "labs/01-naive/lab.py").read_text()
    assert hosted.with_cell(script, "01-naive") == script
    older = script.replace(hosted.cell("01-naive"), hosted.cell("01-naive").replace("LAB =", "LAB  ="))
    assert older != script and hosted.with_cell(older, "01-naive") == script
    bare = script.replace(hosted.cell("01-naive") + "\n", "")
    assert hosted.first_code_cell(bare) != hosted.cell("01-naive")
    assert hosted.with_cell(bare, "01-naive") == script


def test_the_colab_links_follow_the_repository(monkeypatch):
    assert hosted.colab_url("04-ladder") is None
    assert "no public repository" in hosted.colab_lines()
    assert 'os.environ.get("KERNELCOURSE_GIT", "")' in hosted.cell("04-ladder")
    monkeypatch.setattr(hosted, "REPOSITORY", "someone/gemm-course")
    assert hosted.colab_url("04-ladder") == ("https://colab.research.google.com/github/someone/"
                                             "gemm-course/blob/main/labs/04-ladder/lab.ipynb")
    assert hosted.colab_lines().count("colab.research.google.com") == len(LABS)
    assert 'or "https://github.com/someone/gemm-course.git"' in hosted.cell("04-ladder")


def test_setup_md_holds_the_links_as_written():
    text = (ROOT / "SETUP.md").read_text()
    assert hosted.with_links(text) == text


def run_cell(lab: str, where: Path, **env) -> subprocess.CompletedProcess:
    """The lab's first cell, run as a script in `where`."""
    code = hosted.cell(lab)
    return subprocess.run([sys.executable, "-c", code], cwd=where, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60)


def test_in_a_checkout_the_cell_only_finds_the_course(tmp_path):
    before = sorted(p.name for p in (ROOT / "labs/01-naive").iterdir())
    done = run_cell("01-naive", ROOT / "labs/01-naive", KERNELCOURSE_GIT="")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""      # a lab's output starts as before
    assert sorted(p.name for p in (ROOT / "labs/01-naive").iterdir()) == before


def test_opened_alone_with_no_address_it_says_what_to_set(tmp_path):
    done = run_cell("01-naive", tmp_path, KERNELCOURSE_GIT="")
    assert done.returncode == 1
    assert "%env KERNELCOURSE_GIT=" in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> str:
    """The working tree as a git repository a notebook can clone: what a public one would hold."""
    source = tmp_path_factory.mktemp("published")
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    git = ["git", "-c", "user.name=course", "-c", "user.email=course@example.org"]
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "published"]):
        subprocess.run(git + argv, cwd=source, check=True)
    return source.as_uri()


def test_a_notebook_opened_alone_fetches_the_course_and_runs_from_it(tmp_path, published, monkeypatch):
    """lab.ipynb copied into an empty folder, as a hosted Jupyter opens it: its first cell,
    run by a Jupyter kernel, clones the course, installs the CPU set into the kernel's own
    Python (here all of it is there already), and the next cell imports the fetched harness
    from the lab's folder of the clone."""
    import nbformat                      # the dev tools' (a GPU machine's run of -m gpu lacks them)
    from nbclient import NotebookClient
    shutil.copy(ROOT / "labs/02-tiled/lab.ipynb", tmp_path / "lab.ipynb")
    notebook = nbformat.read(tmp_path / "lab.ipynb", as_version=4)
    first = next(c for c in notebook.cells if c.cell_type == "code")
    probe = nbformat.v4.new_code_cell("import os, kernelcourse\nprint(kernelcourse.__file__)\nprint(os.getcwd())")
    notebook.cells = [first, probe]
    monkeypatch.setenv("KERNELCOURSE_GIT", published)
    monkeypatch.setenv("PLATFORM", "cpu")
    NotebookClient(notebook, timeout=300, resources={"metadata": {"path": str(tmp_path)}}).execute()
    clone = tmp_path / "gemm-course"
    said = "".join(o.get("text", "") for o in first.outputs)
    assert (clone / "kernelcourse" / "hosted.py").is_file()
    assert "platform: cpu (PLATFORM is set)" in said and "into this Python (--here)" in said
    assert "this Python's own (kept)" in said
    assert f"the course: fetched into {clone}" in said
    module, cwd = "".join(o.get("text", "") for o in probe.outputs).split()
    assert Path(module).resolve() == (clone / "kernelcourse" / "__init__.py").resolve()
    assert Path(cwd).resolve() == (clone / "labs" / "02-tiled").resolve()

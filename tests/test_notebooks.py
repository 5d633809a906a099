"""Each lab's notebook is generated from its lab.py; this keeps the two from drifting apart.
(`make test` also executes every notebook headless with nbmake.)"""
from pathlib import Path

import pytest

pytestmark = [pytest.mark.notebooks]

jupytext = pytest.importorskip("jupytext", reason="jupytext is a dev dependency (make setup installs it)")

LABS = sorted((Path(__file__).resolve().parent.parent / "labs").glob("*/lab.py"))


def cells(notebook):
    return [(cell.cell_type, cell.source.strip()) for cell in notebook.cells if cell.source.strip()]


@pytest.mark.parametrize("script", LABS, ids=[p.parent.name for p in LABS])
def test_notebook_matches_its_script(script):
    notebook = script.with_suffix(".ipynb")
    assert notebook.is_file(), f"{notebook} is missing: run `make sync-notebooks`"
    assert cells(jupytext.read(notebook)) == cells(jupytext.read(script)), (
        f"{notebook.name} differs from {script.name}: run `make sync-notebooks`")
    outputs = [cell for cell in jupytext.read(notebook).cells if cell.get("outputs")]
    assert not outputs, "commit notebooks without outputs"

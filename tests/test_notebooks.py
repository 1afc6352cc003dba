"""Every notebook in notebooks/ runs end to end, as a user would run it, on a fresh MV_HOME.

Given a notebook, when all its cells run in a Jupyter kernel on this virtualenv's Python, then
none fails. The kernel is named by a kernel spec written for the test (this interpreter, by
absolute path), so a python3 kernel registered elsewhere on the machine is never picked up; each
notebook starts its own Spark, as mv.session() does for a user.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
KERNEL = "mv-test-python"
CELL_TIMEOUT_S = 600


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    """A kernel spec for this interpreter, first on Jupyter's search path; the kernel's environment."""
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "mv tests", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("MV_HOME", str(tmp_path / "mv_home"))
    for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
        monkeypatch.delenv(name, raising=False)
    return KERNEL


def test_there_are_notebooks():
    assert [p.name for p in NOTEBOOKS] == ["01_quick_start.ipynb", "02_incremental_view.ipynb",
                                           "03_operating_views.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)
    assert "except NameError" in code[0].source  # Databricks: keep the notebook's own `spark`


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_end_to_end(path, kernel, tmp_path):
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, kernel_name=kernel, timeout=CELL_TIMEOUT_S,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, with the cell and its traceback, if a cell fails
    errors = [output for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.outputs if output.output_type == "error"]
    assert not errors

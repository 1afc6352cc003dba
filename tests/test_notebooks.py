"""Every notebook in notebooks/ runs end to end, as a user would run it, on a fresh MV_HOME.

Given the notebooks, when all their cells run in one Jupyter kernel on this virtualenv's Python, one
notebook after the other, then none fails. The kernel is named by a kernel spec written for the
test (this interpreter, by absolute path), so a python3 kernel registered elsewhere on the machine is
never picked up. The first notebook starts Spark as mv.session() does for a user; the others find
its `spark`, as a notebook does where a session exists already (Databricks, pyspark's shell), which
saves starting Spark three times.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

# Real notebook kernels, about 90 s: make test-slow (CI runs it after make test).
pytestmark = pytest.mark.slow

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
jupyter_client = pytest.importorskip("jupyter_client")

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
KERNEL = "mv-test-python"
CELL_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """One kernel for every notebook, on this interpreter (a kernel spec first on Jupyter's search
    path) and a fresh MV_HOME; its folder is the notebooks' working directory."""
    folder = tmp_path_factory.mktemp("notebooks")
    spec = folder / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "mv tests", "language": "python"}))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("JUPYTER_PATH", str(folder / "jupyter"))
        env.setenv("MV_HOME", str(folder / "mv_home"))
        for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
            env.delenv(name, raising=False)
        manager = jupyter_client.KernelManager(kernel_name=KERNEL)
        manager.start_kernel(cwd=str(folder))
    try:
        yield manager
    finally:
        manager.shutdown_kernel(now=True)


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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_end_to_end(path, kernel):
    notebook = nbformat.read(path, as_version=4)
    # a kernel manager of the test's own: the kernel outlives the notebook. execute raises
    # CellExecutionError, with the cell and its traceback, if a cell fails.
    nbclient.NotebookClient(notebook, km=kernel, timeout=CELL_TIMEOUT_S).execute()
    errors = [output for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.outputs if output.output_type == "error"]
    assert not errors

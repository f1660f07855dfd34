"""Every tutorial in colab/ runs top to bottom in its small mode (TFDPMECH_NOTEBOOK_SMALL=1), on both stacks (DP-SGD
with tensorflow-privacy on TensorFlow 2.15, with tfdpmech's own engine on Keras 3)."""

import glob
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "colab", "*.ipynb")))

nbformat = pytest.importorskip("nbformat", reason="install the notebooks extra: pip install 'tfdpmech[notebooks]'")
nbclient = pytest.importorskip("nbclient", reason="install the notebooks extra: pip install 'tfdpmech[notebooks]'")


@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[os.path.basename(p) for p in NOTEBOOKS])
def test_notebook_runs_in_small_mode(path, tmp_path, monkeypatch):
    monkeypatch.setenv("TFDPMECH_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    monkeypatch.setenv("PYTHONPATH", ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    nb = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"), "commit notebooks cleared"
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                            ).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors

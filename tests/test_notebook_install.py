"""Every tutorial starts the same way: a first cell that explains TFDPMECH_SOURCE, then one shared install cell."""

import glob
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "colab", "*.ipynb")))


def _cells(path):
    with open(path, encoding="utf-8") as fh:
        return [("".join(c["source"]), c["cell_type"]) for c in json.load(fh)["cells"]]


def test_every_notebook_has_the_same_install_cell_after_its_first_cell():
    assert len(NOTEBOOKS) >= 7
    install = {os.path.basename(p): _cells(p)[1] for p in NOTEBOOKS}
    assert len(set(install.values())) == 1, sorted(install)
    source, kind = next(iter(install.values()))
    assert kind == "code" and '%pip install -q "tfdpmech[dpsgd] @ {TFDPMECH_SOURCE}"' in source
    assert source.count("pip install") == 1  # nothing installed beside tfdpmech and its extra


def test_the_first_cell_explains_where_tfdpmech_comes_from():
    for path in NOTEBOOKS:
        first, kind = _cells(path)[0]
        assert kind == "markdown", path
        assert "`TFDPMECH_SOURCE`" in first and "python -m build" in first, path
        assert "attrs" in first and "23.2.0" in first, path  # what pip changes on Colab, said before it happens


def test_the_install_cell_takes_a_local_wheel_or_folder_as_pip_needs_it(tmp_path, monkeypatch):
    """pip's "tfdpmech[dpsgd] @ SOURCE" refuses a bare path ("No scheme supplied"): the cell makes it a file:// URL."""
    source, _ = _cells(NOTEBOOKS[0])[1]
    setup = source.split("\ntry:")[0]  # the lines before the install itself
    for given, expected in ((str(tmp_path), tmp_path.resolve().as_uri()),
                            ("git+https://github.com/o/tfdpmech.git", "git+https://github.com/o/tfdpmech.git")):
        monkeypatch.setenv("TFDPMECH_SOURCE", given)
        namespace = {}
        exec(setup, namespace)
        assert namespace["TFDPMECH_SOURCE"] == expected

"""The install cell every tutorial in colab/ starts with, and the paragraph of its first cell that explains it.

The notebook generators (tools/make_notebook_*.py) import both; ``python tools/notebook_install.py`` writes them
into every notebook of colab/ (the paragraph at the end of the first cell, the install cell second).
"""
import glob
import os

import nbformat

INSTALL_HEADING = "**Install.**"
INSTALL_PARAGRAPH = f"""{INSTALL_HEADING} The next cell installs tfdpmech unless it already imports; it is the same cell in every tutorial.
tfdpmech is not on PyPI, so the cell installs it from `TFDPMECH_SOURCE`: set that environment variable (or edit the
cell's default) to anything `pip install` accepts: the git URL of your copy of the repository
(`git+https://github.com/<owner>/tfdpmech.git`), a wheel built with `python -m build`, or a local folder. The `[dpsgd]`
extra needs nothing beyond tfdpmech's own DP-SGD engine. On Colab, TensorFlow, Keras and NumPy stay as they are; pip
replaces Colab's `attrs` by 23.2.0, because dp-accounting requires `attrs<24`."""

INSTALL_CELL = """# Install tfdpmech unless it already imports (TFDPMECH_SOURCE: see the first cell).
import os, pathlib
TFDPMECH_SOURCE = os.environ.get("TFDPMECH_SOURCE", "git+https://github.com/<owner>/tfdpmech.git")
if os.path.exists(TFDPMECH_SOURCE):  # a wheel or a folder here: pip's "name @ ..." takes it as a file:// URL
    TFDPMECH_SOURCE = pathlib.Path(TFDPMECH_SOURCE).resolve().as_uri()
try:
    import tfdpmech
except ImportError:
    %pip install -q "tfdpmech[dpsgd] @ {TFDPMECH_SOURCE}"
    import tfdpmech
print("tfdpmech", tfdpmech.__version__)"""


def with_install_paragraph(first_cell: str) -> str:
    """The first cell's text with :data:`INSTALL_PARAGRAPH` as its last paragraph (replacing an older one)."""
    text = first_cell.split("\n\n" + INSTALL_HEADING)[0].rstrip()
    return f"{text}\n\n{INSTALL_PARAGRAPH}"


def main() -> None:
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "colab")
    for path in sorted(glob.glob(os.path.join(root, "*.ipynb"))):
        nb = nbformat.read(path, as_version=4)
        nb.cells[0].source = with_install_paragraph(nb.cells[0].source)
        nb.cells[1].source = INSTALL_CELL
        nbformat.write(nb, path)
        print("wrote", os.path.relpath(path))


if __name__ == "__main__":
    main()

"""Write a notebook from a list of (kind, source) cells, outputs stripped, with the metadata
Snakemake and papermill need. Used to (re)generate the repo's notebook skeletons:

    python tools/make_notebook.py OUT.ipynb < cells.py   # cells separated by lines '# %% [markdown]' / '# %%'
A cell whose first line is '# parameters' gets papermill's `parameters` tag.
"""
import sys

import nbformat


def parse(text: str):
    cells, kind, buf = [], None, []
    for line in text.splitlines():
        if line.startswith("# %%"):
            if kind is not None:
                cells.append((kind, "\n".join(buf).strip("\n")))
            kind, buf = ("markdown" if "[markdown]" in line else "code"), []
        else:
            buf.append(line[2:] if kind == "markdown" and line.startswith("# ") else ("" if kind == "markdown" and line == "#" else line))
    if kind is not None:
        cells.append((kind, "\n".join(buf).strip("\n")))
    return cells


def build(cells) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for kind, src in cells:
        if kind == "markdown":
            nb.cells.append(nbformat.v4.new_markdown_cell(src))
        else:
            cell = nbformat.v4.new_code_cell(src)
            if src.startswith("# parameters"):
                cell.metadata["tags"] = ["parameters"]
            nb.cells.append(cell)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:02d}"
    return nb


if __name__ == "__main__":
    nbformat.write(build(parse(sys.stdin.read())), sys.argv[1])

"""Model families as a product space: the parity matrix of circuits x quantization presets against llama.cpp.

`matrix.py` runs every cell of the committed family fixtures (tests/fixtures/families) and renders the
README table; `matrix.json` holds the data that decides what each cell must show.
"""

from kernelmap.families.matrix import Cell, load_fixtures, markdown_table, run_cell, run_matrix

__all__ = ["Cell", "load_fixtures", "markdown_table", "run_cell", "run_matrix"]

"""`--smoke`: every (row, column) of a table, ablation or figure at its paper settings, trained
for one short round on generated data, one line per cell (docs/smoke.md).

- `cells`: the smoke form of a run config and what it replaces;
- `data`: generated files in each dataset's real format;
- `run`: training the cells, one line each; `report`: the outcomes, header and verdict;
- `check`: a whole smoke check of a plan or a figure; `figure_runs`: a figure's runs;
- `coverage`: the covering set for machines that cannot run every cell.

The package imports nothing itself, so that the figures can name `figure_runs` for typing
without importing the figure machinery back.
"""

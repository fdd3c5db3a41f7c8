"""`--smoke`: every (row, column) of a table, ablation or figure at its paper settings, trained
for one short round on generated data, one line per cell (docs/smoke.md).

- `cells`: the smoke form of a run config and what it replaces;
- `data`: generated files in each dataset's real format;
- `run`: training the cells, one line each;
- `check`: a whole smoke check of a plan or a figure, with its header and verdict.
"""

from fedbench.runner.smoke.cells import SmokeCell, smoke_config
from fedbench.runner.smoke.check import SmokeReport, smoke_figure, smoke_plan
from fedbench.runner.smoke.run import SmokeOutcome

__all__ = [
    "SmokeCell",
    "SmokeOutcome",
    "SmokeReport",
    "smoke_config",
    "smoke_figure",
    "smoke_plan",
]

# fedbench set-up: `make demo` and `make test` each install first when needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test lint clean reproduce mutation smoke gpu-check

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: install
	$(BIN)/fedbench run table1 --preset quick

# mypy checks the modules listed in pyproject.toml's [tool.mypy] `files` (the ratchet: those
# that type-check today; add one once it passes, never take one out).
lint: install
	$(BIN)/ruff check fedbench tests
	$(BIN)/ruff format --check fedbench tests
	$(BIN)/mypy

test: install lint
	$(BIN)/python -m pytest -q

# Mutation testing of the update rules and the DP code (not in CI: about 2000 mutants, an hour or
# more on 2 cores). mutmut mutates fedbench/algorithms/ and fedbench/privacy/ in a copy under
# mutants/ and runs tests/algorithms and tests/privacy (without the `slow` and `engine` tests)
# against each mutant; `mutmut results` lists the survivors, `mutmut show NAME` one diff, and
# `mutmut run "fedbench.algorithms.dp.*"` runs a part ([tool.mutmut] in pyproject.toml).
mutation: install
	nice -n 10 $(BIN)/mutmut run --max-children $(or $(JOBS),2)
	$(BIN)/mutmut export-cicd-stats
	cat mutants/mutmut-cicd-stats.json

# Every table of the papers at paper settings, 5 seeds: a GPU box with the datasets and weights
# on disk (README, "Reproducing the papers' tables"; docs/). Finished runs are skipped, so an
# interrupted `make reproduce` picks up where it stopped. A table with failed or diverged runs
# (exit code 1) or a missing dataset (exit code 2) does not stop the others; the target then ends
# with an error and names every table that did not finish cleanly.
FEDADAMW_ABLATIONS := components alpha weight-decay aggregation table11 blocks
FEDADAMOM_TABLES := fedadamom-main fedadamom-leaf fedadamom-beta2
DP_TABLES := dp_table2 dp_table2_vit dp_table3 dp_table4 dp_table5 dp_table6 dp_table7 dp_table8 dp_table9 dp_table10 dp_table11

reproduce: install
	@failed=""; \
	$(BIN)/fedbench run table1 --out results || failed="$$failed table1"; \
	for a in $(FEDADAMW_ABLATIONS); do $(BIN)/fedbench ablate $$a --out results || failed="$$failed ablate:$$a"; done; \
	for t in table2 table3 $(DP_TABLES) $(FEDADAMOM_TABLES); do $(BIN)/fedbench run $$t --out results || failed="$$failed $$t"; done; \
	for f in $$($(BIN)/python -c "from fedbench.figures import FIGURES; print(*FIGURES)"); do $(BIN)/fedbench figure $$f --out results || failed="$$failed figure:$$f"; done; \
	if [ -n "$$failed" ]; then echo "make reproduce: not finished cleanly:$$failed (fix the cause above, then rerun make reproduce: finished runs are skipped)"; exit 1; fi

# Every table, ablation and figure at paper settings, one short round per cell on generated data
# (docs/smoke.md): minutes on a GPU, hours on a 2-core CPU. Exit 1 names what failed.
smoke: install
	@failed=""; \
	for t in $$($(BIN)/python -c "from fedbench.runner.table_config import list_tables; print(*list_tables('table'))"); do $(BIN)/fedbench run $$t --smoke || failed="$$failed $$t"; done; \
	for a in $$($(BIN)/python -c "from fedbench.runner.table_config import list_tables; print(*list_tables('ablation'))"); do $(BIN)/fedbench ablate $$a --smoke || failed="$$failed ablate:$$a"; done; \
	for f in $$($(BIN)/python -c "from fedbench.figures import FIGURES; print(*FIGURES)"); do $(BIN)/fedbench figure $$f --smoke || failed="$$failed figure:$$f"; done; \
	if [ -n "$$failed" ]; then echo "make smoke: failed:$$failed"; exit 1; fi

# Everything that needs a GPU, about 9 minutes (docs/performance.md, "make gpu-check"); without
# CUDA every part says "needs CUDA" (a dry run).
gpu-check: install
	$(BIN)/python benchmarks/gpu_check.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache mutants

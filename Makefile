# fedbench set-up: `make demo` and `make test` each install first when needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test lint clean reproduce

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: install
	$(BIN)/fedbench run table1 --preset quick

lint: install
	$(BIN)/ruff check fedbench tests
	$(BIN)/ruff format --check fedbench tests

test: install lint
	$(BIN)/python -m pytest -q

# Every table of the papers at paper settings, 5 seeds: a GPU box with the datasets and weights
# on disk (README, "Reproducing the papers' tables"; docs/). Finished runs are skipped, so an
# interrupted `make reproduce` picks up where it stopped; a table with failed or diverged runs
# (exit code 1) does not stop the others (the `-` prefix).
FEDADAMW_ABLATIONS := components alpha weight-decay aggregation table11 blocks
DP_TABLES := dp_table2 dp_table2_vit dp_table3 dp_table4 dp_table5 dp_table6 dp_table7 dp_table8 dp_table9 dp_table10 dp_table11

reproduce: install
	-$(BIN)/fedbench run table1 --out results
	-for a in $(FEDADAMW_ABLATIONS); do $(BIN)/fedbench ablate $$a --out results; done
	-$(BIN)/fedbench run table2 --out results
	-$(BIN)/fedbench run table3 --out results
	-for t in $(DP_TABLES); do $(BIN)/fedbench run $$t --out results; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

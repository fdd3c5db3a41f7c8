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
	$(BIN)/fedbench train configs/demo.yaml

lint: install
	$(BIN)/ruff check fedbench tests
	$(BIN)/ruff format --check fedbench tests

test: install lint
	$(BIN)/python -m pytest -q

# Every FedAdamW vision table at paper settings (CIFAR-100, 300 rounds, 5 seeds): GPU days, see
# docs/tables.md. Needs CIFAR-100 on disk (data.root) and every algorithm of Table 1 registered.
reproduce: install
	$(BIN)/fedbench run table1 --out results
	$(BIN)/fedbench ablate components --out results
	$(BIN)/fedbench ablate alpha --out results
	$(BIN)/fedbench ablate weight-decay --out results
	$(BIN)/fedbench ablate aggregation --out results
	$(BIN)/fedbench ablate blocks --out results

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

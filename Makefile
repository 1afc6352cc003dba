# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Both bootstrap through `make setup`, which is idempotent: a second run takes a few seconds.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup demo test bench clean

setup: $(STAMP)
	@$(PY) -c "from mv import jars; jars.main()"

# The virtual environment, reinstalled when pyproject.toml changes.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: setup
	$(PY) -m mv.demo

test: setup
	$(PY) -m pytest --durations=25

# QUICK=1 make bench: every benchmark's --quick variant (1M rows or bids).
bench: setup
	$(PY) -m bench.windows $(if $(QUICK),--quick)
	$(PY) -m bench.refresh $(if $(QUICK),--quick)
	$(PY) -m bench.ekuiper $(if $(QUICK),--quick)
	$(PY) -m bench.nexmark $(if $(QUICK),--quick)

clean:
	rm -rf .mv .pytest_cache .hypothesis

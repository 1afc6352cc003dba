# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Both bootstrap through `make setup`, which is idempotent: a second run takes a few seconds.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
# The pyspark the virtual environment holds: 4.2.0 by default; any 4.0.x (from 4.0.1) or 4.1.x works
# too, e.g. `make setup SPARK=4.0.5`. Changing it reinstalls pyspark into the same environment.
SPARK  ?= 4.2.0
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(SPARK)
# The other Spark lines the compatibility subset runs on, each in a virtual environment of its own.
# The first (the oldest) runs all of it; the others leave out its tests marked slow too (a Connect
# server and the minute-long row-view scenarios, which 4.0 and 4.2 run), to keep CI within its 90
# minutes. COMPAT_ALL=1 runs all of it on every line.
COMPAT_SPARK ?= 4.0.5 4.1.4

.PHONY: setup setup-compat setup-flink demo test test-slow test-compat bench bench-flink clean

setup: $(STAMP)
	@$(PY) -c "from mv import jars; raise SystemExit(jars.main())"
	@$(PY) -c "from mv import class_archive; raise SystemExit(class_archive.main())"

# The virtual environment, reinstalled when pyproject.toml or SPARK changes.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev,dbt]' 'pyspark==$(SPARK)'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: setup
	$(PY) -m mv.demo

test: setup
	$(PY) -m pytest -m "not slow" -n 2 --dist loadfile --durations=25

# The tests marked `slow`: processes killed at random moments, the Nexmark benchmark's contenders,
# a local cluster, dbt through a Thrift server, the longer scenario variants (CI runs them after
# make test). Two workers, a test file each at a time, as make test; then the tests marked serial
# alone (threads that race one another, whose race is checked without the workers' load).
test-slow: setup
	$(PY) -m pytest -m "slow and not serial" -n 2 --dist loadfile --durations=10
	$(PY) -m pytest -m "slow and serial" --durations=1

# The virtual environments of COMPAT_SPARK (CI builds them while make test runs), without a class
# archive each (a minute of Spark that would slow make test down; their sessions start without one).
setup-compat:
	@for v in $(COMPAT_SPARK); do MV_CLASS_ARCHIVE=0 $(MAKE) --no-print-directory setup SPARK=$$v VENV=.venv-$$v || exit 1; done

# The tests marked `compat` (window functions against their oracles, CREATE/REFRESH with retractions
# and late rows, a Connect round trip) on each of COMPAT_SPARK.
test-compat: setup-compat
	@for v in $(COMPAT_SPARK); do \
	  echo "== Spark $$v: the compatibility subset"; \
	  marks=compat; [ "$$v" = "$(firstword $(COMPAT_SPARK))" ] || [ -n "$(COMPAT_ALL)" ] || marks="compat and not slow"; \
	  .venv-$$v/bin/python -m pytest -m "$$marks" -n 2 --dist loadfile --durations=5 || exit 1; \
	done

# QUICK=1 make bench: every benchmark's --quick variant (1M rows or bids).
bench: setup
	$(PY) -m bench.windows $(if $(QUICK),--quick)
	$(PY) -m bench.refresh $(if $(QUICK),--quick)
	$(PY) -m bench.ekuiper $(if $(QUICK),--quick)
	$(PY) -m bench.nexmark $(if $(QUICK),--quick)
	$(PY) -m bench.nexmark_queries $(if $(QUICK),--quick)
	$(PY) -m bench.joins --view rows
	$(PY) -m bench.joins --view per_minute
	$(PY) -m bench.daily_keys
	$(PY) -m bench.timestamps $(if $(QUICK),--rows 1000000 --rounds 3)

# PyFlink in a virtual environment of its own (the Flink side of bench/flink.py), reinstalled when
# FLINK changes. Its wheels are large (Beam, Flink's jars): the first install takes a minute or more.
FLINK       ?= 2.3.0
FLINK_VENV  ?= .venv-flink
FLINK_STAMP := $(FLINK_VENV)/.installed-$(FLINK)

setup-flink: $(FLINK_STAMP)

$(FLINK_STAMP):
	$(PYTHON) -m venv $(FLINK_VENV)
	$(FLINK_VENV)/bin/pip install -q --upgrade pip
	$(FLINK_VENV)/bin/pip install -q 'apache-flink==$(FLINK)'
	rm -f $(FLINK_VENV)/.installed-*
	touch $(FLINK_STAMP)

# Our refreshes side by side with Flink on the same bids (bench/flink.py): 3M bids, 8 minutes (13 the first time) on
# 2 cores (QUICK=1: 1M). Outside make test and make bench: it needs .venv-flink.
bench-flink: setup setup-flink
	$(PY) -m bench.flink $(if $(QUICK),--quick) --flink-python $(FLINK_VENV)/bin/python

clean:
	rm -rf .mv .pytest_cache .hypothesis

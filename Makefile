# amux: `make run` serves the app, `make test` runs the whole suite. Both start from nothing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export AMUX_DATA_DIR ?= $(CURDIR)/var

.PHONY: venv run runtimes runtime-user sandbox browser test lint clean chaos bench docs docs-serve openapi

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --upgrade pip
	@$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# Agent runtimes pinned in package.json / package-lock.json, installed where amux finds them,
# only when the lockfile changed since the last install (a stamp in node_modules holds its
# hash). `make run` needs no step here: `amux run` does the same once it holds the data
# directory, and starts without them (see `amux doctor`) when npm or its registry is missing.
runtimes: venv
	@$(BIN)/python -m amux_site.runtimes_install

# Debian's chromium for the browser tests (Playwright drives it; it never downloads a browser).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "browser tests need /usr/bin/chromium: sudo apt-get install chromium"; fi; fi

# Debian's bubblewrap, and the system Python its network relay runs on, for the bwrap
# isolation backend (AMUX_ISOLATION=bwrap; picked by itself as root when a probe works);
# iptables for linux-dac's loopback fence (AMUX_LOOPBACK_FENCE).
sandbox:
	@if [ ! -x /usr/bin/bwrap ] || [ ! -x /usr/bin/python3 ] || [ ! -x /usr/sbin/iptables ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      bubblewrap python3-minimal iptables >/dev/null; \
	  else echo "the bwrap sandbox needs /usr/bin/bwrap and /usr/bin/python3, linux-dac's" \
	    "loopback fence iptables: sudo apt-get install bubblewrap python3-minimal iptables" \
	    "(amux uses linux-dac meanwhile)"; fi; fi

run: venv sandbox
	@$(BIN)/python manage.py amux run

lint: venv
	@$(BIN)/ruff check .
	@$(BIN)/lint-imports --no-cache

# The suite runs on TEST_WORKERS pytest-xdist workers, each an installation of its own
# (tests/support/parallel.py); most of its time is spent waiting on runtimes and servers,
# so more workers than cores pay. Then the tests marked `serial` run alone. Each run prints
# its 30 slowest tests and writes a JUnit report under var/test/.
TEST_WORKERS ?= 4
test: export AMUX_DATA_DIR := $(CURDIR)/var/test
test: venv browser sandbox
	@$(BIN)/python -m amux_site.runtimes_install || true  # the runtime tests say what is missing
	@$(BIN)/ruff check .
	@$(BIN)/lint-imports --no-cache
	@parallel=0; serial=0; list=$(AMUX_DATA_DIR)/serial-tests.txt; rm -f $$list; \
	  AMUX_TEST_SERIAL_LIST=$$list $(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup \
	    -m "not serial" --durations=30 --junitxml=$(AMUX_DATA_DIR)/junit.xml $(PYTEST_ARGS) \
	    || parallel=$$?; \
	  if [ -s $$list ]; then $(BIN)/pytest -n 0 -m serial --durations=30 \
	    --junitxml=$(AMUX_DATA_DIR)/junit-serial.xml $(PYTEST_ARGS) $$(cat $$list) \
	    || serial=$$?; else serial=5; fi; \
	  if [ -z "$$REDIS_URL" ]; then for dir in $(AMUX_DATA_DIR) $(AMUX_DATA_DIR)/gw*; do \
	    AMUX_DATA_DIR=$$dir $(BIN)/python -m amux_site.embedded_redis stop; done; fi; \
	  $(BIN)/python -c 'import sys; codes = [c for c in map(int, sys.argv[1:]) if c != 5]; \
	    sys.exit(max(codes) if codes else 5)' $$parallel $$serial

# Proof under faults (not part of `make test`): 50 ticket lifecycles while the web server,
# workers and session hosts are SIGKILLed at random; prints lost effects, duplicated
# outbound messages and turns without exactly one terminal event, and fails unless all are 0.
chaos: venv
	@$(BIN)/python -m tests.support.chaos --lifecycles $(or $(LIFECYCLES),50)

# Every benchmark from nothing (each on a scratch database of its own: DATABASE_URL's server,
# else an embedded PostgreSQL under var/bench/pg); one line per figure with its goal, and
# var/bench/latest.json. BENCH=name (or a,b) runs some. Fails if a figure was not measured.
bench: export AMUX_DATA_DIR := $(CURDIR)/var/bench
bench: venv runtimes
	@$(BIN)/python -m bench $(BENCH)

clean:
	rm -rf $(VENV) node_modules var site docs/api

# The documentation site (mkdocs.yml, docs/): `make docs` builds it into site/ with
# `mkdocs build --strict` (a broken link, anchor or missing page fails), `make docs-serve`
# serves it at http://127.0.0.1:8001 and rebuilds on change. The REST API reference is
# rendered from the OpenAPI document `openapi` writes (docs/api/openapi.yaml, not kept in git).
openapi: export AMUX_DATA_DIR := $(CURDIR)/var/docs
openapi: venv
	@mkdir -p docs/api $(AMUX_DATA_DIR)
	@$(BIN)/python manage.py spectacular --file docs/api/openapi.yaml

docs: export NO_MKDOCS_2_WARNING := 1
docs: openapi
	@$(BIN)/mkdocs build --strict

docs-serve: export NO_MKDOCS_2_WARNING := 1
docs-serve: openapi
	@$(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:8001

# The base runtime user (AMUX_RUNTIME_USER, default amux-agent), whose group the
# per-session runtime users share: created when missing (root only; amux also creates it,
# and each session's own user, at the first linux-dac or bwrap launch).
runtime-user: venv
	@$(BIN)/python manage.py shell -c "from sessions import isolation; print(isolation.provision())"

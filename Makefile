# The one place that knows how to install, run, test, lint and benchmark Relay.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=

.PHONY: install run test lint format bench bench-smoke install-bench

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# A per-install secret for the embedded default, made once and kept under var/.
var/secret_key: | $(STAMP)
	@mkdir -p var
	@$(PY) -c "import secrets; print(secrets.token_urlsafe(50))" > $@
	@chmod 600 $@

run: install var/secret_key
	@export SECRET_KEY="$${SECRET_KEY:-$$(cat var/secret_key)}" && \
	$(PY) manage.py migrate --noinput && \
	$(PY) manage.py collectstatic --noinput --verbosity 0 && \
	$(PY) manage.py provision_numbers --if-empty --start +442079460000 --count 1000 && \
	exec $(PY) manage.py runrelay --host $(HOST) --port $(PORT)

test: install
	SECRET_KEY="$${SECRET_KEY:-test-only-secret-key-not-for-production}" \
		$(PY) -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The benchmark harness (bench/run.py, issue 6): its own PostgreSQL database and Redis DB,
# its own servers on free ports. `bench` rewrites docs/benchmarks.md; `bench-smoke` runs
# every scenario at tiny scale and reports to var/bench-smoke.md only.
BENCH_STAMP := $(VENV)/.installed-bench
BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/relay_bench_run
BENCH_REDIS_URL ?= redis://127.0.0.1:6379/5
SMOKE_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/relay_bench_smoke
SMOKE_REDIS_URL ?= redis://127.0.0.1:6379/6
BENCH_DATABASE_POOL_SIZE ?= 8

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev,bench]'
	@touch $(BENCH_STAMP)

install-bench: $(BENCH_STAMP)

bench: install-bench
	BENCH_DATABASE_URL=$(BENCH_DATABASE_URL) BENCH_REDIS_URL=$(BENCH_REDIS_URL) \
		BENCH_DATABASE_POOL_SIZE=$(BENCH_DATABASE_POOL_SIZE) $(PY) bench/run.py --write-docs

bench-smoke: install-bench
	BENCH_DATABASE_URL=$(SMOKE_DATABASE_URL) BENCH_REDIS_URL=$(SMOKE_REDIS_URL) \
		BENCH_DATABASE_POOL_SIZE=$(BENCH_DATABASE_POOL_SIZE) $(PY) bench/run.py --smoke

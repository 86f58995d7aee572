# Kernelmap — the two fresh-machine commands are `make run` and `make test`.
PY        ?= python3
VENV      := .venv
VPY       := $(VENV)/bin/python
KM        := $(VENV)/bin/kernelmap
PROMPT    ?= The capital of France is
TOKENS    ?= 64
THREADS   ?= 2

.PHONY: run test test-slow install install-dev lint audit parity fixtures bench sanitize clean

$(VENV)/.stamp-base: pyproject.toml
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[model]'
	touch $@

$(VENV)/.stamp-dev: pyproject.toml $(VENV)/.stamp-base
	$(VPY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.stamp-base
install-dev: $(VENV)/.stamp-dev

run: install
	$(KM) run -p "$(PROMPT)" -n $(TOKENS) -t $(THREADS)

lint: install-dev
	$(VENV)/bin/ruff check src tests benchmarks

audit: install-dev
	$(KM) maps validate
	$(KM) maps audit --check

test: install-dev lint audit
	$(VENV)/bin/pytest -q -x --durations=15

# the checks too slow for `make test` (tests marked `slow`; they skip there unless KERNELMAP_SLOW=1)
test-slow: install-dev
	KERNELMAP_SLOW=1 $(VENV)/bin/pytest -q -x -m slow --durations=15

sanitize: install-dev
	$(VPY) -m kernelmap.build.sanitize $(VENV)/bin/pytest -q tests/kernels

# llama.cpp is the peer: kept out of `make test`; these targets build it into its own venv.
.venv-peer/.stamp: 
	$(PY) -m venv .venv-peer
	.venv-peer/bin/pip install -q --upgrade pip
	.venv-peer/bin/pip install -q 'llama-cpp-python>=0.3' numpy
	.venv-peer/bin/pip install -q -e .
	touch $@

fixtures: .venv-peer/.stamp
	.venv-peer/bin/python -P tests/fixtures/make_llama_fixtures.py
	.venv-peer/bin/python -P tests/fixtures/make_tokenizer_fixtures.py
	.venv-peer/bin/python -P tests/parity_fa/make_fa_fixtures.py --model "$$($(VPY) -P -c 'from kernelmap.runtime import default_model_path; print(default_model_path())')"
	.venv-peer/bin/python -P tests/fixtures/make_op_fixtures.py --model "$$($(VPY) -P -c 'from kernelmap.runtime import default_model_path; print(default_model_path())')"

parity: .venv-peer/.stamp install-dev
	.venv-peer/bin/python -P tests/fixtures/make_tokenizer_fixtures.py --check
	.venv-peer/bin/python -P tests/fixtures/make_llama_fixtures.py --compare
	$(KM) parity --tier 1 --tier 2 --tier 3

bench: install-dev
	$(VPY) benchmarks/resolve.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info

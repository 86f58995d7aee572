# Kernelmap — the two fresh-machine commands are `make run` and `make test`.
PY        ?= python3
VENV      := .venv
VPY       := $(VENV)/bin/python
KM        := $(VENV)/bin/kernelmap
PROMPT    ?= The capital of France is
TOKENS    ?= 64
THREADS   ?= 2

.PHONY: run test test-slow install install-dev lint audit peer parity fixtures family-fixtures bench sanitize clean

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

# llama.cpp is the peer, kept out of `make test` (which reads the committed fixtures). `make peer` builds
# llama-cpp-python (pinned, from source, explicit ISA flags for this CPU, never -march=native, never AMX:
# tests/fixtures/peer_build.py) into .venv-peer and records the build in .venv-peer/peer-build.json (~10+ minutes).
PEER_PY   := .venv-peer/bin/python
PEER_INFO := tests/fixtures/peer_build.py
MODEL_CMD  = $(VPY) -P -c 'from kernelmap.runtime import default_model_path; print(default_model_path())'

.venv-peer/.stamp: $(PEER_INFO)
	$(PY) -m venv .venv-peer
	$(PEER_PY) -m pip install -q --upgrade pip
	CMAKE_ARGS="$$($(PY) $(PEER_INFO) --cmake-args)" FORCE_CMAKE=1 $(PEER_PY) -m pip install -q --no-cache-dir \
		--force-reinstall --no-binary llama-cpp-python "llama-cpp-python==$$($(PY) $(PEER_INFO) --version)" numpy
	$(PY) $(PEER_INFO) --record .venv-peer/peer-build.json --python $(PEER_PY)
	touch $@

peer: .venv-peer/.stamp

# Rewrites every committed peer fixture (each script records the llama.cpp build and CPU path it ran).
fixtures: peer install-dev
	$(PEER_PY) -P tests/fixtures/make_llama_fixtures.py --model "$$($(MODEL_CMD))"
	$(PEER_PY) -P tests/fixtures/make_tokenizer_fixtures.py
	$(PEER_PY) -P tests/parity_fa/make_fa_fixtures.py --threads 1 --model "$$($(MODEL_CMD))"
	$(PEER_PY) -P tests/parity_fa/make_fa_fixtures.py --threads 2 --out tests/fixtures/llama_fa_t2 --model "$$($(MODEL_CMD))"
	$(PEER_PY) -P tests/fixtures/make_long_fixtures.py --model "$$($(MODEL_CMD))"
	$(PEER_PY) -P tests/fixtures/make_op_fixtures.py --model "$$($(MODEL_CMD))"
	$(PEER_PY) -P tests/kernels/nonlinear_fixtures.py --write

# Tiny synthetic models of every family, quantized and run by llama.cpp (VOCAB_DIR: llama.cpp's models/ folder).
family-fixtures: peer install-dev
	$(VPY) tests/fixtures/families/make_family_fixtures.py --peer-python $(PEER_PY) --vocab-dir "$(VOCAB_DIR)"

# Live comparisons with llama.cpp; each exits 1 when a claimed bar fails.
parity: peer install-dev
	$(PEER_PY) -P tests/fixtures/make_tokenizer_fixtures.py --check
	$(PEER_PY) -P tests/parity_fa/make_fa_fixtures.py --compare --threads 1 --model "$$($(MODEL_CMD))"
	$(PEER_PY) -P tests/parity_fa/make_fa_fixtures.py --compare --threads 2 --model "$$($(MODEL_CMD))"
	$(PEER_PY) -P tests/fixtures/make_llama_fixtures.py --compare --model "$$($(MODEL_CMD))"
	$(KM) parity --tier 1 --tier 2 --tier 3
	$(KM) parity --tier 2 --tier 3 --policy llama-cpu-t2 --fixtures tests/fixtures/llama_fa_t2

bench: install-dev
	$(VPY) benchmarks/resolve.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info

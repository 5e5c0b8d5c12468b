PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
DEMO_STAMP := $(VENV)/.installed

.PHONY: demo test install dev bench clean sandbox browser

# the worker's sandbox (bubblewrap); installed when missing where apt-get is available
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && \
		(apt-get install -y -q bubblewrap || (apt-get update -q && apt-get install -y -q bubblewrap)); } || \
		echo "warning: bubblewrap not installed: kernels will run without a sandbox"

$(VENV)/bin/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# the demo's whole-model case study (examples/tiny_lm) runs torch: the same CPU build
$(DEMO_STAMP): pyproject.toml setup.py src/kcontract/freivalds/_fastc.c | $(VENV)/bin/python
	$(BIN)/python -m pip install -q "torch==2.13.0" || $(BIN)/python -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu
	$(BIN)/python -m pip install -q -e ".[plots]"
	touch $@

# torch is pinned to the CPU build so a fresh machine does not pull a multi-GB CUDA build.
$(STAMP): pyproject.toml setup.py src/kcontract/freivalds/_fastc.c | $(VENV)/bin/python
	$(BIN)/python -m pip install -q "torch==2.13.0" || $(BIN)/python -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(DEMO_STAMP) $@

install: $(DEMO_STAMP)
dev: $(STAMP)

demo: $(DEMO_STAMP) sandbox
	$(BIN)/kcontract demo --out out/demo

# the HTML reports are checked in headless Chromium: install it (Debian) when it is missing
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && (apt-get update -qq && apt-get install -y -qq chromium); } || \
	  echo "warning: chromium is not installed (run as root to install it): the browser tests skip"

test: $(STAMP) sandbox browser
	KCONTRACT_REQUIRE_TORCH=1 KCONTRACT_REQUIRE_HELPER=1 $(BIN)/python -m pytest -n 2 -q

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) out build *.egg-info src/*.egg-info src/kcontract/freivalds/*.so

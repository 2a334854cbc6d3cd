# The two commands of the README: `make demo` runs the pipeline on configs/local.toml,
# `make test` passes the tests. Both install what is missing (Debian packages, a venv from PyPI)
# and build first, so they work on a fresh Debian machine as root.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
CONFIG ?= configs/local.toml
# The package installed in place, its C++ core (with the C++ tests) built in build/.
EDITABLE := --no-build-isolation -Cbuild-dir=build -Ccmake.define.SECTORFLOW_BUILD_TESTS=ON -e
# pytest arguments, e.g. `make test PYTEST_ARGS="-k kvstore"`
PYTEST_ARGS ?=

# Debian: libzmq + cppzmq + msgpack-cxx for the C++ core, MPICH for mpi4py (built against it,
# see README "Why Debian's MPICH"), Slurm + munge for the streaming-session tests.
DEB_PACKAGES := g++ cmake ninja-build pkg-config libzmq3-dev cppzmq-dev libmsgpack-cxx-dev \
                mpich libmpich-dev slurm-wlm munge iproute2 libgtest-dev

.PHONY: all deps venv build demo test test-unit bench clean

all: build

deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# The venv and everything pyproject.toml lists for the tests (the one list of Python dependencies).
# The C++ core is built without build isolation, so the build requirements come first.
# mpi4py is built against Debian's MPICH: the PyPI wheel wants libmpi.so.12, which MPICH lacks.
$(VENV)/.deps-stamp: pyproject.toml | deps
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $$($(PYTHON) -c "import tomllib; print(' '.join(tomllib.load(open('pyproject.toml', 'rb'))['build-system']['requires']))")
	$(PIP) install -q --no-binary mpi4py $(EDITABLE) '.[test]'
	touch $@

venv: $(VENV)/.deps-stamp

build: venv
	$(PIP) install -q $(EDITABLE) .

demo: build
	$(VENV)/bin/sectorflow demo --config $(CONFIG)

test: build
	ctest --test-dir build --output-on-failure
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: build
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

bench: build
	$(PY) -m bench --config $(CONFIG)

clean:
	rm -rf build $(VENV)

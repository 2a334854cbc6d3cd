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

# Debian: libzmq + cppzmq + msgpack-cxx for the C++ core, toml++ (header-only) for its reader of
# beamline files (sectorflow::configs), MPICH for mpi4py (built against it,
# see README "Why Debian's MPICH"), Slurm + munge for the streaming-session tests; clang-14 with
# its sanitizer runtimes, libFuzzer and llvm-symbolizer, and dpkg-source (to unpack libzmq's
# source for the TSan build) for `make sanitize` and `make fuzz`; chromium + chromium-driver (the
# dashboard's browser tests, through Selenium) and prometheus (its scrape test).
DEB_PACKAGES := g++ cmake ninja-build pkg-config libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libtomlplusplus-dev \
                mpich libmpich-dev slurm-wlm munge iproute2 libgtest-dev \
                clang-14 libclang-rt-14-dev libfuzzer-14-dev llvm-14 dpkg-dev \
                chromium chromium-driver prometheus

# Sanitizer and fuzz builds (README "Sanitizers and fuzzing"): clang-14, the C++ libraries and
# tests only (no Python extension), one build directory each.
FUZZ_SECONDS ?= 60
# Seconds per fuzz target in `make test`'s short pass.
TEST_FUZZ_SECONDS ?= 10
BUILD_JOBS ?= 2
CLANG_CMAKE := -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSECTORFLOW_PYTHON=OFF
TSAN_LIBZMQ := $(CURDIR)/build-tsan/libzmq

.PHONY: all deps venv build demo test test-unit bench clean sanitize asan tsan fuzz fuzz-build

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
	$(MAKE) sanitize
	$(MAKE) fuzz FUZZ_SECONDS=$(TEST_FUZZ_SECONDS)

test-unit: build
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

bench: build
	$(PY) -m bench --config $(CONFIG)

# The C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer, then ThreadSanitizer.
sanitize: asan tsan

asan: deps
	cmake -S . -B build-asan $(CLANG_CMAKE) -DSECTORFLOW_BUILD_TESTS=ON -DSECTORFLOW_SANITIZE=address,undefined
	cmake --build build-asan -j $(BUILD_JOBS)
	ctest --test-dir build-asan --output-on-failure

# Against a libzmq whose atomics TSan sees (tests/sanitizers/libzmq_for_tsan.sh says why).
tsan: deps
	BUILD_JOBS=$(BUILD_JOBS) tests/sanitizers/libzmq_for_tsan.sh $(TSAN_LIBZMQ)
	cmake -S . -B build-tsan $(CLANG_CMAKE) -DSECTORFLOW_BUILD_TESTS=ON -DSECTORFLOW_SANITIZE=thread \
	  -DZeroMQ_DIR=$(TSAN_LIBZMQ)/lib/cmake/ZeroMQ
	cmake --build build-tsan -j $(BUILD_JOBS)
	ctest --test-dir build-tsan --output-on-failure

# The libFuzzer targets of tests/fuzz, under ASan + UBSan, each run for FUZZ_SECONDS.
fuzz-build: deps
	cmake -S . -B build-fuzz $(CLANG_CMAKE) -DSECTORFLOW_FUZZ=ON -DSECTORFLOW_SANITIZE=address,undefined
	cmake --build build-fuzz -j $(BUILD_JOBS) --target fuzz_targets

fuzz: fuzz-build
	tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

clean:
	rm -rf build build-asan build-tsan build-fuzz $(VENV)

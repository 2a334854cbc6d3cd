# The two commands of the README: `make demo` runs the pipeline on configs/local.toml,
# `make test` passes the tests. Both install what is missing (Debian packages, a venv from PyPI)
# and build first, so they work on a fresh Debian machine as root.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
CONFIG ?= configs/local.toml
# pytest arguments, e.g. `make test PYTEST_ARGS="-k kvstore"`
PYTEST_ARGS ?=

# The one list of Python versions: every package pyproject.toml names (all extras, the `tools`
# group), and all they pull in, at exact versions with hashes. `make lock` writes it again.
LOCK := requirements.lock
# The lock's versions without their hashes, as pip constraints (docs/deployment.md): hashes in a
# constraints file put pip in hash-checking mode, which cannot install a source directory.
CONSTRAINTS := $(VENV)/constraints.txt
LOCK_TO_CONSTRAINTS := sed '/^ *[\#-]/d; s/ \\$$//'
# The lock's entries (hashes included) of the packages whose name is $(1) (e.g. `== "pip"`).
lock_entries = awk '/^[^ \#]/ {split($$1, pin, "=="); keep = (pin[1] $(1))} keep' $(LOCK)
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# CI proves a fresh machine: no pip cache (a wheel cached by an earlier build hides a missing step).
ifeq ($(CI),true)
export PIP_NO_CACHE_DIR := 1
endif

# Debian, what `make demo` needs: a C++ toolchain, libzmq (and its cipher, libsodium, which the
# benchmarks time alone) + cppzmq + msgpack-cxx for the C++
# core, toml++ (header-only) for its reader of beamline files (sectorflow::configs), MPICH for the
# NodeGroups' mpi4py (docs/building.md "Why Debian's MPICH").
DEMO_DEB := g++ cmake ninja-build pkg-config libzmq3-dev libsodium-dev cppzmq-dev libmsgpack-cxx-dev libtomlplusplus-dev \
            mpich libmpich-dev
# What `make test` adds: GoogleTest (the C++ tests), Slurm + munge (streaming sessions), iproute2
# (network namespaces); clang-14 with its sanitizer runtimes, libFuzzer and llvm-symbolizer, and
# dpkg-source (to unpack libzmq's source for the TSan build) for `make sanitize` and `make fuzz`;
# chromium + chromium-driver (the dashboard's browser tests, through Selenium) and prometheus (its
# scrape test).
TEST_DEB := libgtest-dev slurm-wlm munge iproute2 \
            clang-14 libclang-rt-14-dev libfuzzer-14-dev llvm-14 dpkg-dev \
            chromium chromium-driver prometheus

# Sanitizer and fuzz builds (docs/building.md "Sanitizers and fuzzing"): clang-14, the C++ libraries and
# tests only (no Python extension), one build directory each.
FUZZ_SECONDS ?= 60
# Seconds per fuzz target in `make test`'s short pass.
TEST_FUZZ_SECONDS ?= 10
BUILD_JOBS ?= 2
CLANG_CMAKE := -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSECTORFLOW_PYTHON=OFF
TSAN_LIBZMQ := $(CURDIR)/build-tsan/libzmq

.PHONY: all deps test-deps venv core build build-tests lock image demo test test-unit bench clean sanitize asan tsan fuzz fuzz-build

all: build

# Installs the Debian packages of $(1) that are missing.
define apt_install
	@missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call apt_install,$(DEMO_DEB))

test-deps: deps
	$(call apt_install,$(TEST_DEB))

# The venv, from the lock alone (each package checked against its hashes): pip itself at the
# lock's version first, then every package of the lock.
$(VENV)/.pip-stamp: $(LOCK)
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(LOCK_TO_CONSTRAINTS) $(LOCK) > $(CONSTRAINTS)
	$(call lock_entries,== "pip") > $(VENV)/pip.txt
	$(PIP) install -q --require-hashes --no-deps -r $(VENV)/pip.txt
	touch $@

$(VENV)/.deps-stamp: $(VENV)/.pip-stamp
	$(PIP) install -q --require-hashes --no-deps -r $(LOCK)
	touch $@

# PyPI's mpi4py wheel loads the MPI library it finds as <venv>/lib/libmpi.so.12 (where PyPI's own
# MPICH wheel would put it); Debian's MPICH has the same ABI under the name libmpich.so.12. This
# library of no code of its own, named libmpi.so.12 and linked to libmpich.so.12, makes the wheel
# run on Debian's MPICH: no three-minute build of mpi4py from source in every new venv (README
# "Why Debian's MPICH").
MPI_SHIM := $(VENV)/lib/libmpi.so.12
link_mpi_shim = cc -shared -o $(1) -Wl,-soname,libmpi.so.12 -Wl,--no-as-needed -x c /dev/null -lmpich
$(MPI_SHIM): $(VENV)/.pip-stamp | deps
	$(call link_mpi_shim,$@)

venv: $(VENV)/.deps-stamp $(MPI_SHIM)

# The C++ core and the package, in place, in build/ (TESTS=ON adds the C++ tests).
TESTS ?= OFF
core: $(VENV)/.deps-stamp | deps
	$(PIP) install -q --no-deps --no-build-isolation -Cbuild-dir=build -Ccmake.define.SECTORFLOW_BUILD_TESTS=$(TESTS) -e .

# Two jobs at once: the Debian packages install while pip fetches the wheels. `pip check` then
# fails if the lock lacks something pyproject.toml asks for.
build:
	$(MAKE) -j2 core $(MPI_SHIM)
	$(PIP) check

build-tests: test-deps
	$(MAKE) -j2 core $(MPI_SHIM) TESTS=ON
	$(PIP) check

# Writes the lock again from pyproject.toml's ranges: newest versions for CPython 3.11 on x86-64
# Linux. Review the diff and run `make test` before committing it.
lock: venv
	$(VENV)/bin/uv pip compile -q pyproject.toml --all-extras --group tools --generate-hashes \
	  --python-version 3.11 --python-platform x86_64-manylinux_2_28 --custom-compile-command "make lock" -o $(LOCK)

# The OCI image (docs/deployment.md "Running from the image"): a base of Debian packages only, made by
# mmdebstrap and imported into podman (no registry is reachable), tagged by its package list; on
# it, sectorflow's wheel built here (in build/, beside the editable install's objects) and the
# lock's versions of its Python packages.
IMAGE ?= localhost/sectorflow:latest
IMAGE_RELEASE := bookworm
IMAGE_DEB := python3 python3-venv libzmq5 mpich ca-certificates
IMAGE_BASE := localhost/sectorflow-base:$(IMAGE_RELEASE)-$(shell echo $(IMAGE_DEB) | sha256sum | cut -c1-12)
IMAGE_TOOLS_DEB := podman runc uidmap mmdebstrap
IMAGE_BUILD := build-image
# podman with the runtime and limits this machine needs (the script says why).
PODMAN := image/podman

image: $(VENV)/.deps-stamp | deps
	$(call apt_install,$(IMAGE_TOOLS_DEB))
	rm -rf $(IMAGE_BUILD)/context && mkdir -p $(IMAGE_BUILD)/context
	$(PIP) wheel -q --no-deps --no-build-isolation -Cbuild-dir=build -w $(IMAGE_BUILD)/context .
	$(PIP) install -q --dry-run --ignore-installed --report $(IMAGE_BUILD)/report.json -c $(CONSTRAINTS) \
	  "$$(ls $(IMAGE_BUILD)/context/sectorflow-*.whl)[nodegroup,dashboard,plot]"
	$(PY) image/lock_subset.py $(IMAGE_BUILD)/report.json $(LOCK) > $(IMAGE_BUILD)/context/requirements.txt
	$(PIP) download -q --require-hashes --no-deps --only-binary :all: -d $(IMAGE_BUILD)/context/wheels \
	  -r $(IMAGE_BUILD)/context/requirements.txt
	$(call link_mpi_shim,$(IMAGE_BUILD)/context/libmpi.so.12)
	$(PODMAN) image exists $(IMAGE_BASE) || { \
	  mmdebstrap --quiet --variant=minbase --include="$(IMAGE_DEB)" $(IMAGE_RELEASE) $(IMAGE_BUILD)/base.tar && \
	  $(PODMAN) import -q $(IMAGE_BUILD)/base.tar $(IMAGE_BASE) && rm $(IMAGE_BUILD)/base.tar; }
	# The image it replaces is removed (unless a container still uses it): rebuilds leave no heap
	# of untagged images behind.
	old=$$($(PODMAN) image inspect --format '{{.Id}}' $(IMAGE) 2>/dev/null || true); \
	$(PODMAN) build -q --network none --build-arg BASE=$(IMAGE_BASE) -t $(IMAGE) \
	  -f image/Containerfile $(IMAGE_BUILD)/context && \
	if [ -n "$$old" ] && [ "$$old" != "$$($(PODMAN) image inspect --format '{{.Id}}' $(IMAGE))" ]; then \
	  $(PODMAN) rmi "$$old" >/dev/null 2>&1 || true; fi
	@$(PODMAN) image inspect --format 'built $(IMAGE): {{.Size}} bytes' $(IMAGE)

demo: build
	$(VENV)/bin/sectorflow demo --config $(CONFIG)

test: build-tests
	ctest --test-dir build --output-on-failure
	$(PY) -m pytest $(PYTEST_ARGS)
	$(MAKE) sanitize
	$(MAKE) fuzz FUZZ_SECONDS=$(TEST_FUZZ_SECONDS)

test-unit: build-tests
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

bench: build
	$(PY) -m bench --config $(CONFIG)

# The C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer, then ThreadSanitizer.
sanitize: asan tsan

asan: test-deps
	cmake -S . -B build-asan $(CLANG_CMAKE) -DSECTORFLOW_BUILD_TESTS=ON -DSECTORFLOW_SANITIZE=address,undefined
	cmake --build build-asan -j $(BUILD_JOBS)
	ctest --test-dir build-asan --output-on-failure

# Against a libzmq whose atomics TSan sees (tests/sanitizers/libzmq_for_tsan.sh says why).
tsan: test-deps
	BUILD_JOBS=$(BUILD_JOBS) tests/sanitizers/libzmq_for_tsan.sh $(TSAN_LIBZMQ)
	cmake -S . -B build-tsan $(CLANG_CMAKE) -DSECTORFLOW_BUILD_TESTS=ON -DSECTORFLOW_SANITIZE=thread \
	  -DZeroMQ_DIR=$(TSAN_LIBZMQ)/lib/cmake/ZeroMQ
	cmake --build build-tsan -j $(BUILD_JOBS)
	ctest --test-dir build-tsan --output-on-failure

# The libFuzzer targets of tests/fuzz, under ASan + UBSan, each run for FUZZ_SECONDS.
fuzz-build: test-deps
	cmake -S . -B build-fuzz $(CLANG_CMAKE) -DSECTORFLOW_FUZZ=ON -DSECTORFLOW_SANITIZE=address,undefined
	cmake --build build-fuzz -j $(BUILD_JOBS) --target fuzz_targets

fuzz: fuzz-build
	tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

clean:
	rm -rf build build-asan build-tsan build-fuzz build-image $(VENV)

# Instrumented builds of the C++ libraries and their tests (docs/building.md "Sanitizers and fuzzing").
#
#   SECTORFLOW_SANITIZE  "address,undefined" or "thread" (any -fsanitize= list the compiler takes):
#                        every target of this tree is compiled and linked with it. UBSan halts on
#                        the first error (-fno-sanitize-recover=all): a report that scrolls past
#                        in a passing run is a report nobody reads.
#   SECTORFLOW_FUZZ      the libFuzzer targets of tests/fuzz (clang only); the libraries get
#                        coverage instrumentation (-fsanitize=fuzzer-no-link) for them.
#
# Neither goes with the Python extension: an instrumented _core would need the sanitizer runtime
# preloaded into the interpreter, and these builds exist to run the C++ tests and fuzz targets.
set(SECTORFLOW_SANITIZE "" CACHE STRING "Sanitizers for the libraries and C++ tests: address,undefined or thread")
option(SECTORFLOW_FUZZ "Build the libFuzzer targets of tests/fuzz (clang)" OFF)

if(SECTORFLOW_SANITIZE OR SECTORFLOW_FUZZ)
  if(SECTORFLOW_PYTHON)
    message(FATAL_ERROR "SECTORFLOW_SANITIZE / SECTORFLOW_FUZZ build the C++ libraries and tests only; "
                        "configure with -DSECTORFLOW_PYTHON=OFF (the Makefile's build-asan, build-tsan and build-fuzz do)")
  endif()
  # Frames and symbols make the reports point at a line.
  add_compile_options(-g -fno-omit-frame-pointer)
endif()

if(SECTORFLOW_SANITIZE)
  if(SECTORFLOW_SANITIZE MATCHES "thread" AND SECTORFLOW_SANITIZE MATCHES "address")
    message(FATAL_ERROR "SECTORFLOW_SANITIZE='${SECTORFLOW_SANITIZE}': ThreadSanitizer and AddressSanitizer "
                        "cannot share a build; use 'address,undefined' and 'thread' in two build directories")
  endif()
  add_compile_options(-fsanitize=${SECTORFLOW_SANITIZE} -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${SECTORFLOW_SANITIZE} -fno-sanitize-recover=all)
  if(SECTORFLOW_SANITIZE MATCHES "thread" AND NOT ZeroMQ_DIR)
    message(WARNING "ThreadSanitizer without an instrumented libzmq reports false races on every message passed "
                    "between threads; `make tsan` builds one (tests/sanitizers/libzmq_for_tsan.sh) and passes "
                    "-DZeroMQ_DIR=<its prefix>/lib/cmake/ZeroMQ")
  endif()
endif()

if(SECTORFLOW_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "SECTORFLOW_FUZZ needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}; "
                        "configure with -DCMAKE_CXX_COMPILER=clang++-14")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

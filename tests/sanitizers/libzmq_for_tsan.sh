#!/usr/bin/env bash
# Builds the installed libzmq again from Debian's source package of the same version, with its
# atomic operations instrumented for ThreadSanitizer, into PREFIX (make tsan links the TSan build
# against it). Usage: tests/sanitizers/libzmq_for_tsan.sh PREFIX
#
# Why: ZeroMQ hands a message from one thread to another through lock-free pipes (ypipe) whose
# only synchronisation is an atomic pointer. Debian's libzmq is not instrumented, so TSan sees the
# sender's writes and the receiver's reads of a message (an inproc envelope, a payload, a kvmsg)
# with nothing ordering them, and reports races in every test that passes a message between
# threads: false reports in our own code that no suppression could remove without hiding real
# ones. With the atomics instrumented TSan sees the ordering and reports nothing. Plain memory
# accesses inside libzmq stay uninstrumented, as libzmq's own ENABLE_TSAN build leaves them: its
# threads coordinate by convention more than by locks, which TSan cannot follow.
set -euo pipefail

prefix=${1:?usage: libzmq_for_tsan.sh PREFIX}
version=$(dpkg-query -W -f='${source:Version}' libzmq5)
source_package=$(dpkg-query -W -f='${source:Package}' libzmq5)
stamp="$prefix/.built-$version"
[ -f "$stamp" ] && exit 0

# Runs a step with its output in $work/<log>; on failure shows the end of it.
logged() {
  local log="$work/$1"
  shift
  "$@" >"$log" 2>&1 || {
    echo "libzmq_for_tsan.sh: '$*' failed; the end of $log:" >&2
    tail -20 "$log" >&2
    exit 1
  }
}

work="$prefix.work"
rm -rf "$work" "$prefix"
mkdir -p "$work/apt/lists/partial" "$work/src"
# The source of this machine's Debian packages: its own Debian sources, as deb-src, in a private
# apt state that leaves the system's untouched.
sources=/etc/apt/sources.list.d/debian.sources
if [ ! -f "$sources" ]; then
  echo "libzmq_for_tsan.sh: $sources not found; it holds the Debian sources the source package comes from" >&2
  exit 1
fi
sed 's/^Types: deb$/Types: deb-src/' "$sources" >"$work/apt/debian-src.sources"
apt_options=(-q -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/apt"
             -o "Dir::State::Lists=$work/apt/lists")
logged apt-update.log apt-get "${apt_options[@]}" update
(cd "$work/src" && logged apt-source.log apt-get "${apt_options[@]}" source --download-only "$source_package=$version")
# apt checked the files against the signed Sources index; dpkg-source, lacking Debian's keyring,
# would only warn that it cannot check the .dsc's own signature.
logged dpkg-source.log dpkg-source -x "$work/src/${source_package}_${version}.dsc" "$work/libzmq"

# Only what sectorflow uses: tcp, inproc and ipc; no docs, tests, drafts or optional transports.
tsan="-fsanitize=thread -fno-omit-frame-pointer -mllvm -tsan-instrument-memory-accesses=0"
logged cmake.log cmake -S "$work/libzmq" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_C_FLAGS="$tsan" -DCMAKE_CXX_FLAGS="$tsan" -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DBUILD_TESTS=OFF -DBUILD_STATIC=OFF -DWITH_DOCS=OFF -DWITH_DOC=OFF \
  -DWITH_PERF_TOOL=OFF -DENABLE_CPACK=OFF -DENABLE_DRAFTS=OFF -DWITH_LIBSODIUM=OFF -DWITH_LIBBSD=OFF
logged build.log cmake --build "$work/build" -j "${BUILD_JOBS:-2}"
logged install.log cmake --install "$work/build"
rm -rf "$work"
touch "$stamp"
echo "libzmq $version with TSan-instrumented atomics in $prefix"

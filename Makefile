# SPDX-License-Identifier: Apache-2.0
# railio: the verbs people expect, over the CMake presets (CMakePresets.json).
#
#   make / make build   configure (preset "default", build/) if needed, then build
#   make test           install the tests' missing packages, build, run every ctest test
#   make demo           build, then ./build/railio demo
#   make bench          build, then ./build/railio bench mock
#   make asan | tsan    configure + build that preset (build-asan/, build-tsan/), run ctest there
#   make fuzz           build every libFuzzer target (tests/fuzz/) with clang, fuzz each
#                       FUZZ_SECONDS (300), FUZZ_JOBS at once (all cores); corpora and
#                       crashes are kept in build/fuzz/<name>/
#   make debug          configure + build the debug preset (build-debug/)
#   make clang          configure + build with clang, warnings as errors (build-clang/), unit tests
#   make format         clang-format every C source in place
#   make format-check   fail if any C source is not formatted
#   make install        build, then install under PREFIX (default /usr/local), into
#                       DESTDIR if set: make install PREFIX=/usr DESTDIR=/tmp/pkg
#   make uninstall      remove what the last make install installed (build/install_manifest.txt,
#                       or MANIFEST=...), with the same DESTDIR
#   make deps           install what the build needs when something is missing
#                       (scripts/install-deps.sh build)
#   make deps-test      and the tests' peers: Ceph, radosgw, fio, iperf3, nftables ...
#   make clean          remove every build directory
#
# Variables: PREFIX, DESTDIR (install), RIO_WERROR=ON (warnings are errors), RIO_WITH_CURL / RIO_WITH_RADOS
# / RIO_WITH_URING=AUTO|ON|OFF, CMAKE_ARGS="-D..." (more configure arguments),
# CTEST_ARGS="-L unit" (e.g. a label), CTEST_JOBS=2.

RIO_WERROR ?= OFF
RIO_WITH_CURL ?= AUTO
RIO_WITH_RADOS ?= AUTO
RIO_WITH_URING ?= AUTO
CTEST_JOBS ?= 2
CTEST_ARGS ?=
PREFIX ?= /usr/local
DESTDIR ?=
FUZZ_SECONDS ?= 300
FUZZ_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
FUZZ_TARGETS ?=

CONFIGURE_ARGS = -DCMAKE_INSTALL_PREFIX=$(PREFIX) -DRIO_WERROR=$(RIO_WERROR) -DRIO_WITH_CURL=$(RIO_WITH_CURL) \
	-DRIO_WITH_RADOS=$(RIO_WITH_RADOS) -DRIO_WITH_URING=$(RIO_WITH_URING) $(CMAKE_ARGS)

dir_default := build
dir_debug := build-debug
dir_asan := build-asan
dir_tsan := build-tsan
dir_clang := build-clang

ASAN_ENV = ASAN_OPTIONS="$${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}" \
	UBSAN_OPTIONS="$${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
TSAN_ENV = TSAN_OPTIONS="$${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"

# $(call configure,PRESET): configure when the build directory is new or the
# arguments changed since the last configure through this Makefile.
define configure
@args='$(CONFIGURE_ARGS)'; stamp=$(dir_$(1))/.make-configure-args; \
	if [ ! -f $(dir_$(1))/build.ninja ] || [ "$$(cat $$stamp 2>/dev/null)" != "$$args" ]; then \
		cmake --preset $(1) $$args && printf '%s\n' "$$args" > $$stamp; \
	fi
endef

# $(call ctest,PRESET)
ctest = ctest --test-dir $(dir_$(1)) --output-on-failure -j$(CTEST_JOBS) $(CTEST_ARGS)

.DEFAULT_GOAL := build
.PHONY: build test demo bench asan tsan clang fuzz debug format format-check deps clean install uninstall deps-test

build: deps
	$(call configure,default)
	cmake --build --preset default

test: deps-test build
	$(call ctest,default)

demo: build
	./$(dir_default)/railio demo

bench: build
	./$(dir_default)/railio bench mock

# Every target (or FUZZ_TARGETS="proto http"), corpora kept across runs.
fuzz: deps-test
	bash scripts/fuzz.sh -k -o $(dir_default)/fuzz -t $(FUZZ_SECONDS) -j $(FUZZ_JOBS) $(FUZZ_TARGETS)

debug: deps
	$(call configure,debug)
	cmake --build --preset debug

asan: deps-test
	$(call configure,asan)
	cmake --build --preset asan
	$(ASAN_ENV) $(call ctest,asan)

tsan: deps-test
	$(call configure,tsan)
	cmake --build --preset tsan
	$(TSAN_ENV) $(call ctest,tsan)

# A second compiler's warnings over the whole tree (errors with RIO_WERROR=ON,
# as CI sets it); the unit tests check the build runs.
clang: deps-test
	$(call configure,clang)
	cmake --build --preset clang
	ctest --test-dir $(dir_clang) --output-on-failure -j$(CTEST_JOBS) -L unit

install: build
	DESTDIR="$(DESTDIR)" cmake --install $(dir_default)

# The manifest lists the installed paths without DESTDIR; the directories
# railio owns (.../railio/...) go too once empty.
MANIFEST = $(dir_default)/install_manifest.txt
uninstall:
	@test -f $(MANIFEST) || { echo "make uninstall: no $(MANIFEST): run make install first" >&2; exit 1; }
	@while IFS= read -r f || [ -n "$$f" ]; do rm -f "$(DESTDIR)$$f" && echo "removed $(DESTDIR)$$f"; done < $(MANIFEST)
	@sed 's|/[^/]*$$||' $(MANIFEST) | sort -ru | while IFS= read -r d; do \
		while case "$$d" in */railio*) true;; *) false;; esac && rmdir "$(DESTDIR)$$d" 2>/dev/null; do \
			d=$${d%/*}; \
		done; \
	done

C_SOURCES = $(shell find include src tests bench -name '*.[ch]' 2>/dev/null)

format:
	clang-format -i $(C_SOURCES)

format-check:
	clang-format --dry-run -Werror $(C_SOURCES)

deps:
	@bash scripts/install-deps.sh --check build || bash scripts/install-deps.sh build

deps-test:
	@bash scripts/install-deps.sh --check test || bash scripts/install-deps.sh test

clean:
	rm -rf $(dir_default) $(dir_debug) $(dir_asan) $(dir_tsan) $(dir_clang)

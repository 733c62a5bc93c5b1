# rma - GNU make front end for the CMake build.
#
#   make | make build   configure build/ (warnings as errors) and build
#   make demo           build, then two processes move data over loopback
#   make test           ctest in build/, then the ASan+UBSan build, then fuzzers
#   make asan           only the ASan+UBSan build and its ctest (build-asan/)
#   make fuzz           only the libFuzzer build and its fuzz tests (build-fuzz/)
#   make install        install under PREFIX (default /usr/local); DESTDIR works
#   make clean          remove every build folder
#
# Every target that needs packages runs scripts/deps.sh first.

PREFIX       ?= /usr/local
BUILD        ?= build
ASAN_BUILD   ?= build-asan
FUZZ_BUILD   ?= build-fuzz
JOBS         ?= $(shell nproc 2>/dev/null || echo 2)
CTEST_JOBS   ?= 2
# Default per-test limit for tests that set no TIMEOUT of their own.
CTEST_TIMEOUT ?= 300
CMAKE_ARGS   ?=
FUZZ_CC      ?= clang

MAKEFLAGS += --no-print-directory

DEPS  = bash scripts/deps.sh
CTEST = ctest --output-on-failure --no-tests=error --timeout $(CTEST_TIMEOUT)

# Sanitizer runtimes: stop at the first report, with a stack.
SAN_ENV = ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: all build deps demo test unit asan fuzz install clean

all: build

deps:
	@$(DEPS)

build: deps
	cmake -S . -B $(BUILD) -DRMA_WERROR=ON -DBUILD_TESTING=ON $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	bash scripts/demo.sh $(BUILD)

# Sequential on purpose: each step runs only if the one before passed.
# DEPS=: lets the steps skip the check test already made.
test: deps
	$(MAKE) --no-print-directory unit DEPS=:
	$(MAKE) --no-print-directory asan DEPS=:
	$(MAKE) --no-print-directory fuzz DEPS=:
	@echo "make test: all steps passed"

unit: build
	$(CTEST) --test-dir $(BUILD) -j $(CTEST_JOBS)

asan: deps
	cmake -S . -B $(ASAN_BUILD) -DRMA_SANITIZE=ON -DBUILD_TESTING=ON $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	$(SAN_ENV) $(CTEST) --test-dir $(ASAN_BUILD) -j $(CTEST_JOBS)

fuzz: deps
	CC=$(FUZZ_CC) cmake -S . -B $(FUZZ_BUILD) -DRMA_FUZZ=ON -DBUILD_TESTING=ON $(CMAKE_ARGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	$(SAN_ENV) $(CTEST) --test-dir $(FUZZ_BUILD) -L fuzz

# rma.pc records the prefix at configure time, so configure with it too.
install: deps
	cmake -S . -B $(BUILD) -DRMA_WERROR=ON -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)
	cmake --install $(BUILD) --prefix $(PREFIX)
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) tests/fuzz/corpus-run

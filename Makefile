# collsynth build.  Entry points (README): `make run`, `make test`.
# Other targets: all, install, test-asan, test-slow, bench, valgrind, clean.
#
# Layout: synth/*/ and codegen/ build into build/libcollsynth.a; server/ (minus
# main.c) into build/libcollsynthd.a; clients/cli/ into build/collsynth;
# server/main.c into build/collsynthd.  Every tests/test_*.c is one Check
# runner (build/tests/test_*), linked with the other tests/*.c helpers
# (build/libtesthelpers.a, with clients/slurm/cluster.c); so are the benches.
# Module-specific rules (CUDA, Slurm plugin, dashboard) live in mk/*.mk.

SHELL := /bin/bash
CC ?= cc
BUILD ?= build
OPT ?= -O2 -g
SAN ?=
CSTD := -std=c11 -D_GNU_SOURCE
WARN := -Wall -Wextra -Werror
# synth/ is split by subject (model, verify, simulate, smt, tacos, baseline,
# synthesize, ...); every subfolder is on the include path.
SYNTH_DIRS := $(sort $(dir $(wildcard synth/*/*.h)))
INCLUDES := $(patsubst %/,-I%,$(SYNTH_DIRS)) -Icodegen -Iserver -Itests
PKG_CFLAGS = $(shell pkg-config --cflags jansson libmicrohttpd sqlite3 libpq libcurl check 2>/dev/null)
# COIN-OR CLP (LPs) and CBC (MILPs) for the mcf method, through their C APIs.
COIN_CFLAGS = $(shell pkg-config --cflags cbc clp 2>/dev/null || echo -I/usr/include/coin)
COIN_LIBS = $(shell pkg-config --libs cbc clp 2>/dev/null || echo -lCbcSolver -lCbc -lCgl -lOsiClp -lOsi -lClpSolver -lClp -lCoinUtils)
CFLAGS_ALL = $(CSTD) $(OPT) $(SAN) $(WARN) $(INCLUDES) $(PKG_CFLAGS) $(COIN_CFLAGS) -MMD -MP $(EXTRA_CFLAGS)
# bliss: canonical labelling for the isomorphism-aware cache (synth/iso).
LIBS_CORE = -lz3 -lbliss $(COIN_LIBS) -ljansson -lzstd -lz -lpthread -lm
LIBS_SERVER := -lmicrohttpd -lsqlite3 -lpq -lcurl
LIBS_CHECK = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt)

LIB_SRC := $(wildcard synth/*/*.c codegen/*.c)
SERVER_SRC := $(filter-out server/main.c,$(wildcard server/*.c))
CLI_SRC := $(wildcard clients/cli/*.c)
# The helpers of tests and benches, and the Slurm hook's pure part (cluster.c),
# which tests and benches compose cluster topologies with, as the hook does.
TEST_HELPER_SRC := $(filter-out tests/test_%.c tests/slow_%.c,$(wildcard tests/*.c)) \
    $(wildcard clients/slurm/cluster.c)
TEST_SRC := $(wildcard tests/test_*.c)
SLOW_SRC := $(wildcard tests/slow_*.c)
BENCH_SRC := $(wildcard bench/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
LIB := $(BUILD)/libcollsynth.a
SERVER_LIB := $(BUILD)/libcollsynthd.a
TEST_HELPER_LIB := $(BUILD)/libtesthelpers.a
CLI := $(BUILD)/collsynth
DAEMON := $(BUILD)/collsynthd
TESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
SLOW_TESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(SLOW_SRC))
BENCHES := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))
DEPS_STAMP := build/.deps-$(shell cat scripts/packages-*.txt | md5sum | cut -c1-12)

# Module fragments add to EXTRA_ALL / EXTRA_TEST_DEPS, so they must be read
# before the rules below: make expands a rule's prerequisites as it reads it.
include $(wildcard mk/*.mk)

.SECONDARY:
.PHONY: all deps run test test-asan test-slow bench valgrind clean build-all install
.DEFAULT_GOAL := all

all: deps $(LIB) $(SERVER_LIB) $(if $(CLI_SRC),$(CLI)) $(if $(wildcard server/main.c),$(DAEMON)) $(EXTRA_ALL)

# Installs missing Debian packages once per package-list version.
deps: $(DEPS_STAMP)
$(DEPS_STAMP): scripts/deps.sh $(wildcard scripts/packages-*.txt)
	@mkdir -p build
	@scripts/deps.sh build runtime test
	@rm -f build/.deps-* && touch $@

$(BUILD)/obj/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(LIB): $(call obj,$(LIB_SRC))
	@rm -f $@
	ar rcs $@ $^

$(SERVER_LIB): $(call obj,$(SERVER_SRC)) $(BUILD)/obj/empty.o
	@rm -f $@
	ar rcs $@ $^

$(TEST_HELPER_LIB): $(call obj,$(TEST_HELPER_SRC)) $(BUILD)/obj/empty.o
	@rm -f $@
	ar rcs $@ $^

# An empty object so an empty archive can still be created.
$(BUILD)/obj/empty.o: | deps
	@mkdir -p $(dir $@)
	echo 'typedef int cs_empty_translation_unit;' | $(CC) $(CSTD) -x c -c - -o $@

$(CLI): $(call obj,$(CLI_SRC)) $(SERVER_LIB) $(LIB)
	$(CC) $(SAN) -o $@ $(call obj,$(CLI_SRC)) $(SERVER_LIB) $(LIB) $(LIBS_SERVER) $(LIBS_CORE)

$(DAEMON): $(call obj,server/main.c) $(SERVER_LIB) $(LIB)
	$(CC) $(SAN) -o $@ $^ $(LIBS_SERVER) $(LIBS_CORE)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(TEST_HELPER_LIB) $(SERVER_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(SAN) -o $@ $^ $(LIBS_SERVER) $(LIBS_CORE) $(LIBS_CHECK)

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(TEST_HELPER_LIB) $(SERVER_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(SAN) -o $@ $^ $(LIBS_SERVER) $(LIBS_CORE)

run: all
	@scripts/run.sh

# Every unit and integration test; prints "N passed, N failed, N skipped" last.
test: all $(TESTS) $(EXTRA_TEST_DEPS)
	@BUILD=$(BUILD) tests/run.sh $(TESTS)

# Unit tests under AddressSanitizer + UBSan, in a separate build tree.
test-asan:
	@$(MAKE) --no-print-directory BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined" test

# Compile everything (tests, slow tests, benches) without running any of it.
build-all: all $(TESTS) $(SLOW_TESTS) $(BENCHES) $(EXTRA_TEST_DEPS)

test-slow: all $(SLOW_TESTS)
	@BUILD=$(BUILD) tests/run.sh $(SLOW_TESTS)

bench: all $(BENCHES)
	@BUILD=$(BUILD) bench/run.sh

valgrind: all $(TESTS)
	@BUILD=$(BUILD) VALGRIND=1 tests/run.sh $(TESTS)

# make install [PREFIX=/usr/local] [DESTDIR=]: the CLI and the daemon in
# PREFIX/bin, the Slurm SPANK plugin in PREFIX/lib/collsynth (the README's
# plugstack line uses PREFIX=/usr), the dashboard in PREFIX/share/collsynth
# (an installed collsynthd finds it there without --static-dir), the docs
# and the example cluster file in PREFIX/share/doc/collsynth.  DESTDIR
# stages the tree for a package.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
DATADIR ?= $(PREFIX)/share
DOCDIR ?= $(DATADIR)/doc/collsynth
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/collsynth \
	    $(DESTDIR)$(DATADIR)/collsynth/dashboard $(DESTDIR)$(DOCDIR)/docs
	install -m 0755 $(CLI) $(DAEMON) $(DESTDIR)$(BINDIR)/
	install -m 0644 $(SLURM_PLUGIN) $(DESTDIR)$(LIBDIR)/collsynth/
	install -m 0644 $(wildcard clients/dashboard/*.html clients/dashboard/*.js \
	    clients/dashboard/*.css) $(DESTDIR)$(DATADIR)/collsynth/dashboard/
	install -m 0644 README.md clients/slurm/cluster.example.json $(DESTDIR)$(DOCDIR)/
	install -m 0644 $(wildcard docs/*.md) $(DESTDIR)$(DOCDIR)/docs/

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

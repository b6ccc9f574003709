# libFuzzer harnesses (tests/fuzz/, docs/qa.md "Fuzzing").  Not part of
# `make test`: `make fuzz FUZZ_SECONDS=60` builds every harness with clang,
# -fsanitize=fuzzer,address,undefined in build-fuzz/ and runs each in turn
# for FUZZ_SECONDS from its seed corpus (tests/fuzz/corpus/<name>/); new
# inputs go to build-fuzz/fuzz/work-<name>/, crashes to build-fuzz/fuzz/.
# `make fuzz FUZZ=framing` runs one harness.  The harness sources are also
# compiled (not linked) by the ordinary build, so an API change that breaks
# them fails `make build-all`, not the next fuzzing run.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(FUZZ_SRC))
FUZZ ?= $(FUZZ_NAMES)
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined

EXTRA_TEST_DEPS += $(call obj,$(FUZZ_SRC))

.PHONY: fuzz fuzz-build
fuzz:
	@scripts/deps.sh fuzz
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=clang \
	    OPT="-O1 -g -fno-omit-frame-pointer" SAN="$(FUZZ_SAN)" \
	    EXTRA_CFLAGS="-fsanitize=fuzzer-no-link" FUZZ="$(FUZZ)" fuzz-build
	@tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ)

fuzz-build: $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ))

$(BUILD)/fuzz/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(SERVER_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(SAN) -fsanitize=fuzzer -o $@ $^ $(LIBS_SERVER) $(LIBS_CORE)

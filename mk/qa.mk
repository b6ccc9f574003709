# Extra checking builds (docs/qa.md).
#
# test-tsan: every test under ThreadSanitizer in build-tsan/.  The daemon runs
# syntheses in parallel threads and SMT search runs instances on a worker pool,
# so data races are a real risk that ASan and valgrind do not see.  libz3 is not
# instrumented: tests/tsan.supp silences reports inside it only.  Test binaries
# spawn build-tsan/collsynthd and build-tsan/collsynth, which inherit
# TSAN_OPTIONS and exit 66 on a report (test_server checks the daemon's exit).
.PHONY: test-tsan
test-tsan:
	@TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp $${TSAN_OPTIONS:-}" \
	    $(MAKE) --no-print-directory BUILD=build-tsan OPT="-O1 -g" SAN="-fsanitize=thread" test

# The Slurm SPANK plugin (clients/slurm/): build/slurm/collsynth_spank.so.
#
# A shared object loaded by slurmstepd, so: -fPIC, no sanitizers (they cannot
# be preloaded into slurmstepd), and only jansson and libcurl besides libc.
# It reuses the CLI's HTTP client and cs_common.c, compiled again as PIC.
# spank.h comes from libslurm-dev (scripts/packages-test.txt), installed by the
# `deps` step before anything compiles.

SLURM_PLUGIN := $(BUILD)/slurm/collsynth_spank.so
SLURM_PLUGIN_SRC := clients/slurm/collsynth_spank.c clients/slurm/cluster.c \
    clients/cli/http_client.c synth/model/cs_common.c

$(SLURM_PLUGIN): $(SLURM_PLUGIN_SRC) clients/slurm/cluster.h clients/cli/http_client.h \
    synth/model/cs_common.h | deps
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -O2 -g $(WARN) -fPIC -shared -fvisibility=default -Isynth/model \
	    $(shell pkg-config --cflags jansson libcurl 2>/dev/null) -o $@ $(SLURM_PLUGIN_SRC) \
	    -ljansson -lcurl -lm

ifneq ($(wildcard clients/cli/http_client.c),)
EXTRA_ALL += $(SLURM_PLUGIN)
EXTRA_TEST_DEPS += $(SLURM_PLUGIN)
endif

.PHONY: slurm-plugin
slurm-plugin: $(SLURM_PLUGIN)

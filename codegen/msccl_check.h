/*
 * msccl_check.h - checks an MSCCL algorithm document against what each
 * runtime's parser accepts (shared/reference/msccl-xml.md), by counting on
 * the text itself: it shares nothing with the generator's bookkeeping, so
 * the tests use it to catch a generator that miscounts.
 *
 *     cs_msccl_check_stats st;
 *     if (msccl_check_limits(xml, len, CS_MSCCL_RUNTIME_MSCCL, &st, &err) != CS_OK)
 *         ... err.message names the rank, the element, the limit and the value
 *
 * Checked for both runtimes: the required attributes of <algo>, <gpu>, <tb>
 * and <step>; buffers i/o/s and the step types each runtime knows; peers and
 * gpu ids within ngpus; chan < nchannels; offsets within the declared chunk
 * counts; cnt <= 71.
 * Old runtime (msccl, the NCCL fork): its coll names; i_chunks / o_chunks
 * consistent with nchunksperloop; thread block ids 0..215, unique and
 * consecutive; chan <= 31; at most 32 sending and 32 receiving thread
 * blocks per channel; step s 0..255, in order; at most 16 attributes per
 * element; fewer than 4096 XML elements parsed per rank (the <algo>, every
 * <gpu> of the document, and that rank's <tb> and <step> elements).
 * Executor (msccl-executor): its coll names; minBytes, maxBytes and
 * outofplace present; s < 64; thread block ids up to 1023; nchannels <= 32.
 * CS_MSCCL_RUNTIME_AUTO checks both; a coll name only one runtime knows
 * is accepted where no name both know exists (reducescatter, gather,
 * scatter: msccl_xml.h).  A slice (some <gpu> elements absent)
 * is checked like a full document: each present rank as that rank parses it.
 *
 * The target GPU (msccl_check_for, cs_msccl_options.gpu_sms, the generator's
 * option of the same name): every thread block of a rank must be resident at
 * once, 2 per SM as the NCCL fork assumes (docs/codegen.md), so with
 * gpu_sms=N a rank with more than 2N blocks is CS_ELIMIT naming the SMs,
 * on top of each runtime's own limit (a V100, 80 SMs: at most 160).
 */
#ifndef CS_MSCCL_CHECK_H
#define CS_MSCCL_CHECK_H

#include "msccl_xml.h"

typedef struct cs_msccl_check_stats {
    int ngpus;           /* the <algo>'s ngpus */
    int gpus;            /* <gpu> elements present */
    int nchannels;
    int max_tbs;         /* the most thread blocks of one rank */
    int max_steps;       /* the most steps of one thread block */
    int max_cnt;
    long max_elements;   /* the most XML elements one rank parses */
    long merged_steps;   /* steps with cnt > 1 */
} cs_msccl_check_stats;

/* CS_OK when every rank present would load the document; CS_ELIMIT for a
 * runtime limit, CS_EINVAL for anything else the parsers reject; stats may
 * be NULL. */
int msccl_check_limits(const char *text, size_t len, cs_msccl_runtime runtime,
                       cs_msccl_check_stats *stats, cs_error *err);

/* The same for the document's target as the generator was given it: reads
 * opt->runtime and opt->gpu_sms only (0: no limit beyond the runtime's own;
 * 1..4096, else CS_EINVAL with field "gpu_sms"), so a test checks with the
 * very options it generated with. */
int msccl_check_for(const char *text, size_t len, const cs_msccl_options *opt,
                    cs_msccl_check_stats *stats, cs_error *err);

#endif

/*
 * simulate_internal.h - the simulator's two passes, for the verifier's
 * algorithm_verify_simulate (verify.h), which runs them inside its own
 * passes instead of repeating the work.  Private to synth/.
 *
 * simulate_algorithm is: check every send (ranges, links); link the sends
 * chunk by chunk (next_send: the next send of the same chunk from the same
 * rank; consumer: the first send of the chunk from dst after this send
 * arrives), which needs the sends gathered chunk by chunk (send_batches);
 * then one timing sweep in processing order.  The verifier checks every
 * send more strictly and gathers the same chunks for its value replay, so
 * algorithm_verify_simulate skips the simulator's checks and hands each
 * gathered chunk to sim_links_chunk as well: one streaming gather instead
 * of two.  The results are the same to the bit (tests/test_vsim.c).
 */
#ifndef CS_SIMULATE_INTERNAL_H
#define CS_SIMULATE_INTERNAL_H

#include "send_order_internal.h"
#include "simulate.h"

/* next_send and consumer of every send (by index), built a batch at a time:
 * sim_links_batch before a batch's chunks, sim_links_chunk for each chunk
 * (threads 0..nthreads-1 may run at once, each on its own chunks),
 * sim_links_batch_done after it, and sim_links_finish after the last.
 * With dense batches (whole) each chunk's links go where its records sit
 * among all the batches' (8 bytes per send) and are turned into index
 * order once at the end: one streaming pass instead of one per batch (each
 * of which touched every cache line of both per-send arrays).  Peak: 8
 * bytes per send while batches run, 16 while converting.  Sparse batches
 * write each batch back as it ends. */
typedef struct sim_links {
    uint32_t *next_send, *consumer;   /* per send; NO_SEND (UINT32_MAX): none */
    uint32_t *out;                     /* the batch's links, by record position */
    long out_cap;
    long nsends;
    bool whole;                        /* out spans every batch (dense) */
    int nthreads;
    void *workers;                     /* one linker per thread */
} sim_links;

/* trank: algorithm_time_ranks of a timed algorithm, NULL untimed.  CS_OK
 * or CS_ENOMEM; free with sim_links_free either way. */
int sim_links_init(sim_links *L, const cs_algorithm *a, const uint32_t *trank, int nthreads,
                   const send_batches *sb);
int sim_links_batch(sim_links *L, const send_batch *b);
/* Chunk j of batch b (records in index order, not reordered yet). */
int sim_links_chunk(sim_links *L, int thread, const send_batch *b, uint32_t j);
void sim_links_batch_done(sim_links *L, send_batches *sb, const send_batch *b);
/* After the last batch, sb still alive: next_send and consumer complete. */
int sim_links_finish(sim_links *L, send_batches *sb);
/* After the last batch: frees everything but next_send and consumer (the
 * batch buffer, the per-thread scratch) before the timing sweep allocates
 * its own per-send array. */
void sim_links_done(sim_links *L);
void sim_links_free(sim_links *L);

/* The timing sweep of simulate_algorithm over sends already checked (every
 * send in range with an existing link; a->ranks and the topology agree;
 * bytes finite and >= 0): ord from send_processing_order, links complete.
 * Fills *out (sim_result_free) or returns an error with *out empty; out->ideal_us
 * only when ideal (else NAN: simulate_algorithm_time). */
int sim_timing(const cs_topology *t, const cs_algorithm *a, double bytes, const link_finder *lf,
               const uint32_t *trank, const uint32_t *ord, const sim_links *links, bool ideal,
               cs_sim_result *out, cs_error *err);

#endif

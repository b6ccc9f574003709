/*
 * cuda_gen.h - generates a self-contained CUDA source (.cu) that runs one
 * verified algorithm on the GPUs of one node, following the SCCL lowering:
 *
 *  - one kernel per rank for all steps; thread block b of rank r runs the
 *    transfers of one (peer, channel) in schedule order;
 *  - push model: the sender writes straight into the receiver's buffer
 *    through a peer pointer (cudaDeviceEnablePeerAccess in one process), and
 *    reductions are fused into that copy (dst = src + dst's partial value);
 *  - per-transfer ready flags in the receiver's memory: after the copy,
 *    __threadfence_system() then a flag store of the run's epoch; a transfer
 *    first waits for the flags of what it depends on (codegen_plan.h: every
 *    dependency is an earlier transfer, so blocks never wait in a cycle);
 *  - 128-bit vector loads and stores in a tiled loop (each thread moves 16
 *    bytes per tile), with a scalar tail.
 *
 * The same file compiles as plain C11 when CS_HOST_BUILD is defined: thread
 * blocks of all ranks become pthreads, flags C11 atomics, the system fence an
 * atomic_thread_fence, buffers host memory.  Tests run that build to check
 * the data; nvcc only compiles the CUDA build here (no GPU).
 *
 * Generated API (PREFIX defaults to "collsynth_", macros upper-case):
 *     COLLSYNTH_RANKS, COLLSYNTH_CHUNKS, COLLSYNTH_I_CHUNKS, COLLSYNTH_O_CHUNKS,
 *     COLLSYNTH_KIND ("allgather", ...), COLLSYNTH_ROOT, COLLSYNTH_ELEM (type),
 *     COLLSYNTH_RANK_LO, COLLSYNTH_RANK_HI (the ranks whose blocks the file holds)
 *     int  collsynth_setup(collsynth_ctx *ctx, const int *devices, size_t chunk_elems);
 *     int  collsynth_run(collsynth_ctx *ctx, void *const *inputs, void *const *outputs);
 *     void collsynth_teardown(collsynth_ctx *ctx);
 *     const char *collsynth_error(const collsynth_ctx *ctx);
 *     size_t collsynth_scratch_bytes(int rank, size_t chunk_elems);
 *     size_t collsynth_flags_bytes(void);
 *     int  collsynth_run_slice(const collsynth_peer *peers, unsigned long long epoch,
 *                              size_t chunk_elems, const int *devices, char *error, size_t n);
 * inputs[r] / outputs[r] are rank r's device buffers (I_CHUNKS and O_CHUNKS
 * chunks of chunk_elems elements, NCCL layout); devices[r] is rank r's GPU
 * (ignored by the host build).  Functions return 0 or a negative error.
 *
 * Slices (cuda_generate_ranks): the source for ranks A..B of a schedule
 * (one node, at most CS_CUDA_MAX_RANKS ranks) holds the same API, macros and
 * tables, restricted to the thread blocks ranks A..B run: their tasks (with
 * the schedule-wide flag ids), dependencies and blocks; RANK_LO = A,
 * RANK_HI = B.  It is meant for a process (or a group of processes) per GPU:
 * each runs its slice with run_slice, given every rank's input, output,
 * scratch (scratch_bytes) and flag (flags_bytes, zeroed once) memory, the
 * peers' opened through CUDA IPC, and the same epoch (1, 2, ...) in every
 * process.  The slices of all ranks, run together, do exactly what the full
 * source does; setup/run (one process driving every GPU) refuse a partial
 * slice.  Ranks 0..P-1 is the full source, byte-identical to cuda_generate's.
 */
#ifndef CS_CUDA_GEN_H
#define CS_CUDA_GEN_H

#include "algorithm.h"

#define CS_CUDA_MAX_RANKS 64

typedef enum cs_cuda_elem {
    CS_CUDA_FLOAT = 0,
    CS_CUDA_DOUBLE,
    CS_CUDA_INT32
} cs_cuda_elem;

typedef struct cs_cuda_options {
    const char *prefix;      /* C identifier prefix; NULL: "collsynth_" */
    cs_cuda_elem elem;       /* element type (default float) */
    int threads;             /* threads per block (default 256, multiple of 32) */
} cs_cuda_options;

void cuda_options_default(cs_cuda_options *opt);
/* "float", "double", "int32". */
int cuda_elem_from_name(const char *name, cs_cuda_elem *out, cs_error *err);

/* t may be NULL (one lane per link).  More than CS_CUDA_MAX_RANKS ranks is
 * CS_ELIMIT (the generated code is for the GPUs of one node).  *out is a
 * malloc'd NUL-terminated source; len may be NULL. */
int cuda_generate(const cs_algorithm *a, const cs_topology *t, const cs_cuda_options *opt,
                  char **out, size_t *len, cs_error *err);
/* The source of ranks rank_lo..rank_hi's thread blocks (see above). */
int cuda_generate_ranks(const cs_algorithm *a, const cs_topology *t, const cs_cuda_options *opt,
                        int rank_lo, int rank_hi, char **out, size_t *len, cs_error *err);

#endif

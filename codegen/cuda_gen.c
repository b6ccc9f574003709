/*
 * cuda_gen.c - emits the SCCL-style CUDA source for an algorithm (see
 * cuda_gen.h) from the shared lowering in codegen_plan.c.
 *
 * The output has three parts: a fixed runtime (macro layer for the CUDA and
 * host builds, the tiled 128-bit copy, the block loop, setup/run/teardown),
 * written below as a template with @P@ (identifier prefix) and @U@ (macro
 * prefix) placeholders; per-algorithm tables (transfers with their buffer
 * slots and dependencies, thread blocks per rank); and a few macros that
 * describe the collective for callers.  Keeping the runtime fixed and the
 * schedule in tables keeps the generated code small for large schedules and
 * keeps every generated file compiling the same way.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_plan.h"
#include "cuda_gen.h"

static const char *const runtime_template =
"#include <stddef.h>\n"
"#include <stdint.h>\n"
"#include <stdio.h>\n"
"#include <string.h>\n"
"\n"
"#ifndef @U@THREADS\n"
"#define @U@THREADS @THREADS@\n"
"#endif\n"
"\n"
"#ifdef CS_HOST_BUILD\n"
"/* Host build: every thread block of every rank is a pthread, flags are C11\n"
" * atomics and the system fence is a sequentially consistent fence. */\n"
"#include <pthread.h>\n"
"#include <sched.h>\n"
"#include <stdatomic.h>\n"
"#include <stdio.h>\n"
"#include <stdlib.h>\n"
"#include <time.h>\n"
"typedef _Atomic unsigned long long @P@flag_t;\n"
"#define @U@DEV static\n"
"#define @U@TABLE static const\n"
"#define @U@TID ((size_t)0)\n"
"#define @U@NTHREADS ((size_t)1)\n"
"#define @U@SYNC() ((void)0)\n"
"#define @U@FENCE_SYSTEM() atomic_thread_fence(memory_order_seq_cst)\n"
"#define @U@FENCE_ACQUIRE() atomic_thread_fence(memory_order_acquire)\n"
"#define @U@FLAG_LOAD(p) atomic_load_explicit((p), memory_order_acquire)\n"
"#define @U@FLAG_STORE(p, v) atomic_store_explicit((p), (v), memory_order_release)\n"
"typedef struct { @U@ELEM lane[@U@VEC_LANES]; } @P@vec_t;\n"
"#define @U@VLOAD(v, ptr) memcpy(&(v), (ptr), sizeof(v))\n"
"#define @U@VSTORE(ptr, v) memcpy((ptr), &(v), sizeof(v))\n"
"#define @U@VADD(v, w) do { for (int l_ = 0; l_ < @U@VEC_LANES; l_++) (v).lane[l_] += (w).lane[l_]; } while (0)\n"
"#else\n"
"#include <cuda_runtime.h>\n"
"typedef unsigned long long @P@flag_t;\n"
"#define @U@DEV static __device__ __forceinline__\n"
"#define @U@TABLE static __device__ const\n"
"#define @U@TID ((size_t)threadIdx.x)\n"
"#define @U@NTHREADS ((size_t)blockDim.x)\n"
"#define @U@SYNC() __syncthreads()\n"
"#define @U@FENCE_SYSTEM() __threadfence_system()\n"
"#define @U@FENCE_ACQUIRE() __threadfence_system()\n"
"#define @U@FLAG_LOAD(p) (*(volatile const unsigned long long *)(p))\n"
"#define @U@FLAG_STORE(p, v) (*(volatile unsigned long long *)(p) = (v))\n"
"typedef @CUDAVEC@ @P@vec_t;\n"
"#define @U@VLOAD(v, ptr) ((v) = *(const @P@vec_t *)(ptr))\n"
"#define @U@VSTORE(ptr, v) (*(@P@vec_t *)(ptr) = (v))\n"
"#define @U@VADD(v, w) (@CUDAVADD@)\n"
"#endif\n"
"\n"
"typedef struct @P@task {\n"
"    int id;                   /* the task's flag (the same in every slice) */\n"
"    int src_rank, dst_rank;   /* where the source is read / the result is written */\n"
"    int op;                   /* 0 copy, 1 reduce: dst = src + red */\n"
"    int sbuf, dbuf, rbuf;     /* 0 input, 1 output, 2 scratch */\n"
"    int soff, doff, roff;     /* chunk offsets */\n"
"    int dep_begin, ndeps;     /* into @P@deps: tasks that must have landed */\n"
"} @P@task;\n"
"\n"
"typedef struct @P@ptrs {\n"
"    @U@ELEM *buf[@U@RANKS][3];       /* peer pointers: input, output, scratch */\n"
"    @P@flag_t *flags[@U@RANKS];     /* per rank, one flag per task landing there */\n"
"} @P@ptrs;\n"
"\n"
"/* One rank's memory as a slice sees it (@P@run_slice). */\n"
"typedef struct @P@peer {\n"
"    void *input, *output;\n"
"    void *scratch;                  /* @P@scratch_bytes(rank, chunk_elems) */\n"
"    void *flags;                    /* @P@flags_bytes(), zeroed before the first run */\n"
"} @P@peer;\n"
"\n"
"@TABLES@"
"\n"
"/* Moves n elements src -> dst (dst = src + red when red), 128 bits per thread\n"
" * per tile, then a scalar tail. */\n"
"@U@DEV void @P@move(@U@ELEM *dst, const @U@ELEM *src, const @U@ELEM *red, size_t n)\n"
"{\n"
"    size_t nvec = 0;\n"
"    uintptr_t align = (uintptr_t)dst | (uintptr_t)src | (uintptr_t)(red ? red : src);\n"
"    if (align % 16 == 0)\n"
"        nvec = n / @U@VEC_LANES;\n"
"    for (size_t k = @U@TID; k < nvec; k += @U@NTHREADS) {\n"
"        @P@vec_t v;\n"
"        @U@VLOAD(v, src + k * @U@VEC_LANES);\n"
"        if (red) {\n"
"            @P@vec_t w;\n"
"            @U@VLOAD(w, red + k * @U@VEC_LANES);\n"
"            @U@VADD(v, w);\n"
"        }\n"
"        @U@VSTORE(dst + k * @U@VEC_LANES, v);\n"
"    }\n"
"    for (size_t k = nvec * @U@VEC_LANES + @U@TID; k < n; k += @U@NTHREADS) {\n"
"        @U@ELEM v = src[k];\n"
"        if (red)\n"
"            v += red[k];\n"
"        dst[k] = v;\n"
"    }\n"
"}\n"
"\n"
"#ifdef CS_HOST_BUILD\n"
"typedef struct @P@host_sync {\n"
"    @P@flag_t abort;\n"
"    double deadline;\n"
"} @P@host_sync;\n"
"\n"
"static double @P@now(void)\n"
"{\n"
"    struct timespec ts;\n"
"    clock_gettime(CLOCK_MONOTONIC, &ts);\n"
"    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;\n"
"}\n"
"\n"
"/* One spin of a wait: 1 when the run must stop (deadline passed). */\n"
"static int @P@spin(void *host, unsigned long *spins)\n"
"{\n"
"    @P@host_sync *hs = (@P@host_sync *)host;\n"
"    if (@U@FLAG_LOAD(&hs->abort))\n"
"        return 1;\n"
"    if ((++*spins & 255) == 0 && @P@now() > hs->deadline) {\n"
"        @U@FLAG_STORE(&hs->abort, 1ULL);\n"
"        return 1;\n"
"    }\n"
"    sched_yield();\n"
"    return 0;\n"
"}\n"
"#define @U@SPIN_STATE unsigned long spins_ = 0;\n"
"#define @U@SPIN(host) do { if (@P@spin((host), &spins_)) return -1; } while (0)\n"
"#else\n"
"#define @U@SPIN_STATE\n"
"#define @U@SPIN(host) ((void)(host))\n"
"#endif\n"
"\n"
"/* Thread block `block` of rank `rank`: its transfers in order; each waits for\n"
" * the flags of its dependencies, pushes its chunk (reduction fused), fences\n"
" * and raises its own flag in the receiver's memory. */\n"
"@U@DEV int @P@block(int rank, int block, const @P@ptrs *p, unsigned long long epoch, size_t n,\n"
"                    void *host)\n"
"{\n"
"    int b = @P@rank_block_begin[rank] + block;\n"
"    for (int k = @P@block_begin[b]; k < @P@block_begin[b + 1]; k++) {\n"
"        const @P@task *t = &@P@tasks[@P@block_tasks[k]];\n"
"        int id = t->id;\n"
"        if (@U@TID == 0) {\n"
"            @U@SPIN_STATE\n"
"            for (int d = 0; d < t->ndeps; d++) {\n"
"                int dt = @P@deps[2 * (t->dep_begin + d)];\n"
"                int dr = @P@deps[2 * (t->dep_begin + d) + 1]; /* local or the receiver */\n"
"                const @P@flag_t *f = p->flags[dr] + dt;\n"
"                while (@U@FLAG_LOAD(f) < epoch)\n"
"                    @U@SPIN(host);\n"
"            }\n"

"            @U@FENCE_ACQUIRE();\n"
"        }\n"
"        @U@SYNC();\n"
"        @U@ELEM *dst = p->buf[t->dst_rank][t->dbuf] + (size_t)t->doff * n;\n"
"        const @U@ELEM *src = p->buf[t->src_rank][t->sbuf] + (size_t)t->soff * n;\n"
"        const @U@ELEM *red = t->op ? p->buf[t->dst_rank][t->rbuf] + (size_t)t->roff * n : NULL;\n"
"        @P@move(dst, src, red, n);\n"
"        @U@FENCE_SYSTEM(); /* every thread's stores, before the flag */\n"
"        @U@SYNC();\n"
"        if (@U@TID == 0) {\n"
"            @U@FLAG_STORE(p->flags[t->dst_rank] + id, epoch);\n"
"            if (t->src_rank != t->dst_rank)\n"
"                @U@FLAG_STORE(p->flags[t->src_rank] + id, epoch);\n"
"        }\n"
"    }\n"
"    (void)host;\n"
"    return 0;\n"
"}\n"
"\n"
"typedef struct @P@ctx {\n"
"    int devices[@U@RANKS];\n"
"    @U@ELEM *scratch[@U@RANKS];\n"
"    @P@flag_t *flags[@U@RANKS];\n"
"    size_t chunk_elems;\n"
"    unsigned long long epoch;\n"
"    char error[200];\n"
"} @P@ctx;\n"
"\n"
"const char *@P@error(const @P@ctx *ctx)\n"
"{\n"
"    return ctx->error;\n"
"}\n"
"\n"
"#ifdef CS_HOST_BUILD\n"
"int @P@setup(@P@ctx *ctx, const int *devices, size_t chunk_elems)\n"
"{\n"
"    memset(ctx, 0, sizeof *ctx);\n"
"    ctx->chunk_elems = chunk_elems;\n"
"    for (int r = 0; r < @U@RANKS; r++) {\n"
"        ctx->devices[r] = devices ? devices[r] : r;\n"
"        size_t s = (size_t)@P@s_chunks[r] * chunk_elems;\n"
"        ctx->scratch[r] = (@U@ELEM *)calloc(s ? s : 1, sizeof(@U@ELEM));\n"
"        ctx->flags[r] = (@P@flag_t *)malloc(sizeof(@P@flag_t) * (@U@NTASKS ? @U@NTASKS : 1));\n"
"        if (!ctx->scratch[r] || !ctx->flags[r]) {\n"
"            snprintf(ctx->error, sizeof ctx->error, \"out of memory\");\n"
"            return -1;\n"
"        }\n"
"        for (int k = 0; k < @U@NTASKS; k++)\n"
"            atomic_init(&ctx->flags[r][k], 0ULL);\n"
"    }\n"
"    return 0;\n"
"}\n"
"\n"
"void @P@teardown(@P@ctx *ctx)\n"
"{\n"
"    for (int r = 0; r < @U@RANKS; r++) {\n"
"        free(ctx->scratch[r]);\n"
"        free(ctx->flags[r]);\n"
"        ctx->scratch[r] = NULL;\n"
"        ctx->flags[r] = NULL;\n"
"    }\n"
"}\n"
"\n"
"typedef struct @P@thread_arg {\n"
"    const @P@ptrs *p;\n"
"    int rank, block;\n"
"    unsigned long long epoch;\n"
"    size_t n;\n"
"    @P@host_sync *sync;\n"
"} @P@thread_arg;\n"
"\n"
"static void *@P@thread_main(void *arg)\n"
"{\n"
"    @P@thread_arg *a = (@P@thread_arg *)arg;\n"
"    (void)@P@block(a->rank, a->block, a->p, a->epoch, a->n, a->sync);\n"
"    return NULL;\n"
"}\n"
"\n"
"/* Runs the blocks of this source's ranks with one host thread per thread\n"
" * block; a run that does not finish within @U@HOST_TIMEOUT_S seconds (a\n"
" * deadlock) fails. */\n"
"#ifndef @U@HOST_TIMEOUT_S\n"
"#define @U@HOST_TIMEOUT_S 20.0\n"
"#endif\n"
"static int @P@launch(const @P@ptrs *p, unsigned long long epoch, size_t n, const int *devices,\n"
"                     char *error, size_t errlen)\n"
"{\n"
"    (void)devices;\n"
"    int nthreads = @P@host_rank_block_begin[@U@RANKS];\n"
"    pthread_t *th = (pthread_t *)calloc((size_t)(nthreads ? nthreads : 1), sizeof(pthread_t));\n"
"    @P@thread_arg *args = (@P@thread_arg *)calloc((size_t)(nthreads ? nthreads : 1), sizeof(@P@thread_arg));\n"
"    @P@host_sync sync;\n"
"    atomic_init(&sync.abort, 0ULL);\n"
"    sync.deadline = @P@now() + @U@HOST_TIMEOUT_S;\n"
"    if (!th || !args) {\n"
"        free(th);\n"
"        free(args);\n"
"        snprintf(error, errlen, \"out of memory\");\n"
"        return -1;\n"
"    }\n"
"    int started = 0, rc = 0;\n"
"    for (int r = @U@RANK_LO; r <= @U@RANK_HI && rc == 0; r++)\n"
"        for (int b = 0; b < @P@host_rank_block_begin[r + 1] - @P@host_rank_block_begin[r]; b++) {\n"
"            @P@thread_arg *a = &args[started];\n"
"            a->p = p;\n"
"            a->rank = r;\n"
"            a->block = b;\n"
"            a->epoch = epoch;\n"
"            a->n = n;\n"
"            a->sync = &sync;\n"
"            if (pthread_create(&th[started], NULL, @P@thread_main, a) != 0) {\n"
"                @U@FLAG_STORE(&sync.abort, 1ULL);\n"
"                snprintf(error, errlen, \"cannot start a thread\");\n"
"                rc = -1;\n"
"                break;\n"
"            }\n"
"            started++;\n"
"        }\n"
"    for (int k = 0; k < started; k++)\n"
"        pthread_join(th[k], NULL);\n"
"    free(th);\n"
"    free(args);\n"
"    if (rc == 0 && @U@FLAG_LOAD(&sync.abort)) {\n"
"        snprintf(error, errlen, \"timed out: thread blocks waited more than %g s (deadlock)\",\n"
"                 (double)@U@HOST_TIMEOUT_S);\n"
"        rc = -2;\n"
"    }\n"
"    return rc;\n"
"}\n"
"#else\n"
"__global__ void @P@kernel(int rank, @P@ptrs p, unsigned long long epoch, size_t n)\n"
"{\n"
"    (void)@P@block(rank, (int)blockIdx.x, &p, epoch, n, NULL);\n"
"}\n"
"\n"
"static int @P@cuda_fail_to(char *error, size_t errlen, const char *what, cudaError_t e)\n"
"{\n"
"    snprintf(error, errlen, \"%s: %s\", what, cudaGetErrorString(e));\n"
"    return -(int)e;\n"
"}\n"
"#define @P@cuda_fail(ctx, what, e) @P@cuda_fail_to((ctx)->error, sizeof (ctx)->error, (what), (e))\n"
"\n"
"/* Enables peer access between every pair of the ranks' GPUs and allocates\n"
" * scratch and flags on each. */\n"
"int @P@setup(@P@ctx *ctx, const int *devices, size_t chunk_elems)\n"
"{\n"
"    cudaError_t e;\n"
"    memset(ctx, 0, sizeof *ctx);\n"
"    ctx->chunk_elems = chunk_elems;\n"
"    for (int r = 0; r < @U@RANKS; r++)\n"
"        ctx->devices[r] = devices ? devices[r] : r;\n"
"    /* peer access only where a rank writes into another (the schedule's\n"
"     * links): flags are read locally or from that same receiver */\n"
"    for (int k = 0; k < @U@NPEERS; k++) {\n"
"        int r = @P@peers[2 * k], q = @P@peers[2 * k + 1];\n"
"        if (ctx->devices[q] == ctx->devices[r])\n"
"            continue;\n"
"        if ((e = cudaSetDevice(ctx->devices[r])) != cudaSuccess)\n"
"            return @P@cuda_fail(ctx, \"cudaSetDevice\", e);\n"
"        int ok = 0;\n"
"        if ((e = cudaDeviceCanAccessPeer(&ok, ctx->devices[r], ctx->devices[q])) != cudaSuccess)\n"
"            return @P@cuda_fail(ctx, \"cudaDeviceCanAccessPeer\", e);\n"
"        if (!ok) {\n"
"            snprintf(ctx->error, sizeof ctx->error, \"GPU %d cannot access GPU %d\",\n"
"                     ctx->devices[r], ctx->devices[q]);\n"
"            return -1;\n"
"        }\n"
"        e = cudaDeviceEnablePeerAccess(ctx->devices[q], 0);\n"
"        if (e == cudaErrorPeerAccessAlreadyEnabled)\n"
"            (void)cudaGetLastError();\n"
"        else if (e != cudaSuccess)\n"
"            return @P@cuda_fail(ctx, \"cudaDeviceEnablePeerAccess\", e);\n"
"    }\n"
"    for (int r = 0; r < @U@RANKS; r++) {\n"
"        if ((e = cudaSetDevice(ctx->devices[r])) != cudaSuccess)\n"
"            return @P@cuda_fail(ctx, \"cudaSetDevice\", e);\n"
"        size_t s = (size_t)@P@s_chunks[r] * chunk_elems;\n"
"        if ((e = cudaMalloc((void **)&ctx->scratch[r], (s ? s : 1) * sizeof(@U@ELEM))) != cudaSuccess)\n"
"            return @P@cuda_fail(ctx, \"cudaMalloc\", e);\n"
"        size_t fb = sizeof(@P@flag_t) * (@U@NTASKS ? @U@NTASKS : 1);\n"
"        if ((e = cudaMalloc((void **)&ctx->flags[r], fb)) != cudaSuccess)\n"
"            return @P@cuda_fail(ctx, \"cudaMalloc\", e);\n"
"        if ((e = cudaMemset(ctx->flags[r], 0, fb)) != cudaSuccess)\n"
"            return @P@cuda_fail(ctx, \"cudaMemset\", e);\n"
"    }\n"
"    return 0;\n"
"}\n"
"\n"
"void @P@teardown(@P@ctx *ctx)\n"
"{\n"
"    for (int r = 0; r < @U@RANKS; r++) {\n"
"        if (cudaSetDevice(ctx->devices[r]) != cudaSuccess)\n"
"            continue;\n"
"        if (ctx->scratch[r])\n"
"            (void)cudaFree(ctx->scratch[r]);\n"
"        if (ctx->flags[r])\n"
"            (void)cudaFree(ctx->flags[r]);\n"
"        ctx->scratch[r] = NULL;\n"
"        ctx->flags[r] = NULL;\n"
"    }\n"
"}\n"
"\n"
"/* Launches the kernels of this source's ranks (all blocks of all GPUs must\n"
" * be resident at once: one block per (peer, channel)) on the default stream\n"
" * of each rank's GPU and waits for them. */\n"
"static int @P@launch(const @P@ptrs *p, unsigned long long epoch, size_t n, const int *devices,\n"
"                     char *error, size_t errlen)\n"
"{\n"
"    cudaError_t e;\n"
"    for (int r = @U@RANK_LO; r <= @U@RANK_HI; r++) {\n"
"        int nb = @P@host_rank_block_begin[r + 1] - @P@host_rank_block_begin[r];\n"
"        if (nb == 0)\n"
"            continue;\n"
"        if ((e = cudaSetDevice(devices[r])) != cudaSuccess)\n"
"            return @P@cuda_fail_to(error, errlen, \"cudaSetDevice\", e);\n"
"        @P@kernel<<<nb, @U@THREADS>>>(r, *p, epoch, n);\n"
"        if ((e = cudaGetLastError()) != cudaSuccess)\n"
"            return @P@cuda_fail_to(error, errlen, \"kernel launch\", e);\n"
"    }\n"
"    for (int r = @U@RANK_LO; r <= @U@RANK_HI; r++) {\n"
"        if ((e = cudaSetDevice(devices[r])) != cudaSuccess)\n"
"            return @P@cuda_fail_to(error, errlen, \"cudaSetDevice\", e);\n"
"        if ((e = cudaDeviceSynchronize()) != cudaSuccess)\n"
"            return @P@cuda_fail_to(error, errlen, \"cudaDeviceSynchronize\", e);\n"
"    }\n"
"    return 0;\n"
"}\n"
"#endif\n"
"\n"
"/* The whole schedule from one process driving every GPU (setup/run). */\n"
"int @P@run(@P@ctx *ctx, void *const *inputs, void *const *outputs)\n"
"{\n"
"#if @U@RANK_LO != 0 || @U@RANK_HI != @U@RANKS - 1\n"
"    (void)inputs;\n"
"    (void)outputs;\n"
"    snprintf(ctx->error, sizeof ctx->error, \"this source holds ranks %d-%d of %d only: run \"\n"
"             \"each slice with @P@run_slice\", @U@RANK_LO, @U@RANK_HI, @U@RANKS);\n"
"    return -1;\n"
"#else\n"
"    @P@ptrs p;\n"
"    for (int r = 0; r < @U@RANKS; r++) {\n"
"        p.buf[r][0] = (@U@ELEM *)inputs[r];\n"
"        p.buf[r][1] = (@U@ELEM *)outputs[r];\n"
"        p.buf[r][2] = ctx->scratch[r];\n"
"        p.flags[r] = ctx->flags[r];\n"
"    }\n"
"    unsigned long long epoch = ++ctx->epoch;\n"
"    return @P@launch(&p, epoch, ctx->chunk_elems, ctx->devices, ctx->error, sizeof ctx->error);\n"
"#endif\n"
"}\n"
"\n"
"/* Bytes of scratch rank `rank` needs, and of the flags every rank needs\n"
" * (zero them before the first run), for chunks of chunk_elems elements. */\n"
"size_t @P@scratch_bytes(int rank, size_t chunk_elems)\n"
"{\n"
"    if (rank < 0 || rank >= @U@RANKS)\n"
"        return 0;\n"
"    size_t s = (size_t)@P@s_chunks[rank] * chunk_elems;\n"
"    return (s ? s : 1) * sizeof(@U@ELEM);\n"
"}\n"
"\n"
"size_t @P@flags_bytes(void)\n"
"{\n"
"    return sizeof(@P@flag_t) * (@U@NTASKS ? @U@NTASKS : 1);\n"
"}\n"
"\n"
"/* Runs this source's ranks (@U@RANK_LO..@U@RANK_HI) with every rank's memory\n"
" * given: peers[r] for each of the @U@RANKS ranks, however the job obtained\n"
" * it (with a process per GPU, the other ranks' pointers come from\n"
" * cudaIpcOpenMemHandle).  Every slice of one run uses the same epoch: 1 for\n"
" * the first run, one more for each next one.  devices[r] is rank r's GPU\n"
" * (NULL: GPU r; ignored by the host build).  0, or a negative error with a\n"
" * message in error. */\n"
"int @P@run_slice(const @P@peer *peers, unsigned long long epoch, size_t chunk_elems,\n"
"                 const int *devices, char *error, size_t errlen)\n"
"{\n"
"    @P@ptrs p;\n"
"    int dev[@U@RANKS];\n"
"    for (int r = 0; r < @U@RANKS; r++) {\n"
"        p.buf[r][0] = (@U@ELEM *)peers[r].input;\n"
"        p.buf[r][1] = (@U@ELEM *)peers[r].output;\n"
"        p.buf[r][2] = (@U@ELEM *)peers[r].scratch;\n"
"        p.flags[r] = (@P@flag_t *)peers[r].flags;\n"
"        dev[r] = devices ? devices[r] : r;\n"
"    }\n"
"    if (epoch == 0) {\n"
"        snprintf(error, errlen, \"epoch must be 1 or more (flags start at 0)\");\n"
"        return -1;\n"
"    }\n"
"    return @P@launch(&p, epoch, chunk_elems, dev, error, errlen);\n"
"}\n";

void cuda_options_default(cs_cuda_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->elem = CS_CUDA_FLOAT;
    opt->threads = 256;
}

int cuda_elem_from_name(const char *name, cs_cuda_elem *out, cs_error *err)
{
    if (name && !strcmp(name, "float"))
        *out = CS_CUDA_FLOAT;
    else if (name && !strcmp(name, "double"))
        *out = CS_CUDA_DOUBLE;
    else if (name && !strcmp(name, "int32"))
        *out = CS_CUDA_INT32;
    else
        return cs_error_set(err, CS_EINVAL, "elem", "element type \"%s\" is not float, double "
                            "or int32", name ? name : "");
    return CS_OK;
}

/* Copies the template, replacing placeholders. */
static void expand(cs_buf *b, const char *tmpl, const char *const *keys, const char *const *vals,
                   int nkeys)
{
    const char *c = tmpl;
    while (*c) {
        const char *at = strchr(c, '@');
        if (!at) {
            cs_buf_puts(b, c);
            return;
        }
        cs_buf_printf(b, "%.*s", (int)(at - c), c);
        bool done = false;
        for (int k = 0; k < nkeys && !done; k++) {
            size_t n = strlen(keys[k]);
            if (strncmp(at, keys[k], n) == 0) {
                cs_buf_puts(b, vals[k]);
                c = at + n;
                done = true;
            }
        }
        if (!done) {
            cs_buf_puts(b, "@");
            c = at + 1;
        }
    }
}

static int check_prefix(const char *p, cs_error *err)
{
    size_t n = strlen(p);
    if (n == 0 || n > 40 || !(isalpha((unsigned char)p[0]) || p[0] == '_'))
        return cs_error_set(err, CS_EINVAL, "prefix", "prefix \"%s\" is not a C identifier "
                            "prefix (1-40 characters, letter or _ first)", p);
    for (size_t k = 0; k < n; k++)
        if (!isalnum((unsigned char)p[k]) && p[k] != '_')
            return cs_error_set(err, CS_EINVAL, "prefix", "prefix \"%s\" is not a C identifier "
                                "prefix", p);
    return CS_OK;
}

typedef struct blk {
    int peer, chan;
} blk;

static int cmp_blk(const void *x, const void *y)
{
    const blk *a = x, *b = y;
    if ((a->peer < 0) != (b->peer < 0))
        return a->peer < 0 ? 1 : -1;
    if (a->chan != b->chan)
        return a->chan < b->chan ? -1 : 1;
    return (a->peer > b->peer) - (a->peer < b->peer);
}

static int bufcode(char c)
{
    return c == 'i' ? 0 : c == 'o' ? 1 : 2;
}

static void emit_int_table(cs_buf *b, const char *qual, const char *type, const char *name,
                           const long *v, long n)
{
    cs_buf_printf(b, "%s %s %s[%ld] = {", qual, type, name, n ? n : 1);
    if (n == 0)
        cs_buf_puts(b, "0");
    for (long k = 0; k < n; k++)
        cs_buf_printf(b, "%s%s%ld", k ? "," : "", k % 16 == 0 ? "\n    " : " ", v[k]);
    cs_buf_puts(b, "\n};\n");
}

/* Tables: the tasks ranks lo..hi execute (with their flag ids, which are
 * the same in every slice), their dependencies, blocks per rank and their
 * task lists; the other ranks get no blocks. */
static int emit_tables(cs_buf *b, const cg_plan *p, const char *P, const char *U, int lo, int hi)
{
    long nt = p->ntasks;
    size_t ntz = (size_t)(nt ? nt : 1);
    int *task_block = malloc(ntz * sizeof(int));     /* block index within the slice, -1 */
    long *task_row = malloc(ntz * sizeof(long));     /* row in the slice's task table, -1 */
    blk *blocks = malloc(ntz * sizeof(blk));
    long *rank_block_begin = calloc((size_t)p->ranks + 1, sizeof(long));
    long *block_begin = NULL, *block_tasks = malloc(ntz * sizeof(long));
    long *deps = NULL, ndeps = 0, capdeps = 0;
    char name[160];
    int rc = CS_ENOMEM;
    if (!task_block || !task_row || !blocks || !rank_block_begin || !block_tasks)
        goto done;
    /* blocks of each rank: distinct (peer, channel) of the transfers it runs */
    long nblocks = 0, nrows = 0;
    blk *rank_blocks = blocks;
    for (long k = 0; k < nt; k++) {
        int er = p->tasks[k].exec_rank;
        task_block[k] = -1;
        task_row[k] = er >= lo && er <= hi ? nrows++ : -1;
    }
    for (int r = 0; r < p->ranks; r++) {
        rank_block_begin[r] = nblocks;
        if (r < lo || r > hi)
            continue;
        int nb = 0;
        for (long k = 0; k < nt; k++) {
            if (p->tasks[k].exec_rank != r)
                continue;
            const cg_lop *l = &p->lops[p->tasks[k].lop];
            rank_blocks[nb++] = (blk){l->kind == CG_COPY ? -1 : l->peer,
                                      l->kind == CG_COPY ? 0 : l->chan};
        }
        qsort(rank_blocks, (size_t)nb, sizeof(blk), cmp_blk);
        int m = 0;
        for (int k = 0; k < nb; k++)
            if (m == 0 || cmp_blk(&rank_blocks[k], &rank_blocks[m - 1]) != 0)
                rank_blocks[m++] = rank_blocks[k];
        for (long k = 0; k < nt; k++) {
            if (p->tasks[k].exec_rank != r)
                continue;
            const cg_lop *l = &p->lops[p->tasks[k].lop];
            blk key = {l->kind == CG_COPY ? -1 : l->peer, l->kind == CG_COPY ? 0 : l->chan};
            blk *f = bsearch(&key, rank_blocks, (size_t)m, sizeof(blk), cmp_blk);
            task_block[k] = (int)(nblocks + (f - rank_blocks));
        }
        nblocks += m;
        rank_blocks += m;
    }
    rank_block_begin[p->ranks] = nblocks;
    block_begin = calloc((size_t)nblocks + 1, sizeof(long));
    if (!block_begin)
        goto done;
    for (long k = 0; k < nt; k++)
        if (task_block[k] >= 0)
            block_begin[task_block[k] + 1]++;
    for (long k = 0; k < nblocks; k++)
        block_begin[k + 1] += block_begin[k];
    {
        long *fill = malloc((size_t)(nblocks ? nblocks : 1) * sizeof(long));
        if (!fill)
            goto done;
        for (long k = 0; k < nblocks; k++)
            fill[k] = block_begin[k];
        for (long k = 0; k < nt; k++) /* tasks are in landing order: keep it */
            if (task_block[k] >= 0)
                block_tasks[fill[task_block[k]]++] = task_row[k];
        free(fill);
    }
    /* task table */
    cs_buf_printf(b, "#define %sNTASKS %ld\n#define %sNBLOCKS %ld\n\n", U, nt, U, nblocks);
    snprintf(name, sizeof name, "%stasks", P);
    cs_buf_printf(b, "%sTABLE %stask %s[%ld] = {\n", U, P, name, nrows ? nrows : 1);
    if (nrows == 0)
        cs_buf_puts(b, "    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}\n");
    for (long k = 0; k < nt; k++) {
        if (task_row[k] < 0)
            continue;
        const cg_task *t = &p->tasks[k];
        const cg_lop *l = &p->lops[t->lop];
        const cg_lop *rl = t->recv_lop >= 0 ? &p->lops[t->recv_lop] : NULL;
        int src_rank = l->rank, dst_rank = rl ? rl->rank : l->rank;
        cg_slot src = l->src, dst = rl ? rl->dst : l->dst;
        cg_slot red = rl && rl->op == CS_OP_REDUCE ? rl->red : (cg_slot){'i', 0};
        int op = rl && rl->op == CS_OP_REDUCE;
        long begin = ndeps;
        const cg_lop *sides[2] = {l, rl};
        for (int s = 0; s < 2; s++) {
            if (!sides[s])
                continue;
            /* the dependency's flag is read where this side runs: the sender's
             * own memory, or the receiver's (which the sender writes anyway) */
            int read_rank = s == 0 ? src_rank : dst_rank;
            for (int d = 0; d < sides[s]->ndeps; d++) {
                long dt = p->lops[p->deps[sides[s]->dep_begin + d]].task;
                /* same block: implied by the block's order */
                if (dt == k || task_block[dt] == task_block[k])
                    continue;
                bool seen = false;
                for (long e = begin; e < ndeps && !seen; e++)
                    seen = deps[2 * e] == dt;
                if (seen)
                    continue;
                if (2 * ndeps + 2 > capdeps) {
                    capdeps = capdeps ? capdeps * 2 : 1024;
                    long *nd = realloc(deps, (size_t)capdeps * sizeof(long));
                    if (!nd)
                        goto done;
                    deps = nd;
                }
                deps[2 * ndeps] = dt;
                deps[2 * ndeps + 1] = read_rank;
                ndeps++;
            }
        }
        cs_buf_printf(b, "    {%ld, %d, %d, %d, %d, %d, %d, %d, %d, %d, %ld, %ld},\n", k, src_rank,
                  dst_rank, op, bufcode(src.buf), bufcode(dst.buf), bufcode(red.buf), src.off,
                  dst.off, red.off, begin, ndeps - begin);
    }
    cs_buf_puts(b, "};\n");
    char qual[96];
    snprintf(qual, sizeof qual, "%sTABLE", U);
    snprintf(name, sizeof name, "%sdeps", P);
    emit_int_table(b, qual, "int", name, deps, 2 * ndeps);
    snprintf(name, sizeof name, "%sblock_begin", P);
    emit_int_table(b, qual, "int", name, block_begin, nblocks + 1);
    snprintf(name, sizeof name, "%sblock_tasks", P);
    emit_int_table(b, qual, "int", name, block_tasks, nrows);
    snprintf(name, sizeof name, "%srank_block_begin", P);
    emit_int_table(b, qual, "int", name, rank_block_begin, p->ranks + 1);
    /* host-side copies */
    snprintf(name, sizeof name, "%shost_rank_block_begin", P);
    emit_int_table(b, "static const", "int", name, rank_block_begin, p->ranks + 1);
    {
        long *s = malloc((size_t)p->ranks * sizeof(long));
        if (!s)
            goto done;
        for (int r = 0; r < p->ranks; r++)
            s[r] = p->s_chunks[r];
        snprintf(name, sizeof name, "%ss_chunks", P);
        emit_int_table(b, "static const", "int", name, s, p->ranks);
        free(s);
    }
    {
        /* (sender, receiver) pairs of the slice's transfers that need peer access */
        char *seen = calloc((size_t)p->ranks * (size_t)p->ranks, 1);
        long *pairs = malloc((size_t)(2 * nt + 2) * sizeof(long));
        long npairs = 0;
        if (!seen || !pairs) {
            free(seen);
            free(pairs);
            goto done;
        }
        for (long k = 0; k < nt; k++) {
            const cg_task *t = &p->tasks[k];
            if (t->exec_rank == t->flag_rank || task_row[k] < 0)
                continue;
            size_t at = (size_t)t->exec_rank * (size_t)p->ranks + (size_t)t->flag_rank;
            if (seen[at])
                continue;
            seen[at] = 1;
            pairs[2 * npairs] = t->exec_rank;
            pairs[2 * npairs + 1] = t->flag_rank;
            npairs++;
        }
        cs_buf_printf(b, "#define %sNPEERS %ld\n#ifndef CS_HOST_BUILD\n", U, npairs);
        snprintf(name, sizeof name, "%speers", P);
        emit_int_table(b, "static const", "int", name, pairs, 2 * npairs);
        cs_buf_puts(b, "#endif\n");
        free(seen);
        free(pairs);
    }
    rc = CS_OK;
done:
    free(task_block);
    free(task_row);
    free(blocks);
    free(rank_block_begin);
    free(block_begin);
    free(block_tasks);
    free(deps);
    return rc;
}

int cuda_generate(const cs_algorithm *a, const cs_topology *t, const cs_cuda_options *opt,
                  char **out, size_t *len, cs_error *err)
{
    *out = NULL;
    if (len)
        *len = 0;
    if (!a)
        return cs_error_set(err, CS_EINVAL, "algorithm", "no algorithm");
    return cuda_generate_ranks(a, t, opt, 0, a->ranks - 1, out, len, err);
}

int cuda_generate_ranks(const cs_algorithm *a, const cs_topology *t, const cs_cuda_options *opt,
                        int rank_lo, int rank_hi, char **out, size_t *len, cs_error *err)
{
    cs_cuda_options dflt;
    cuda_options_default(&dflt);
    if (!opt)
        opt = &dflt;
    *out = NULL;
    if (len)
        *len = 0;
    if (!a)
        return cs_error_set(err, CS_EINVAL, "algorithm", "no algorithm");
    const char *prefix = opt->prefix ? opt->prefix : "collsynth_";
    int rc = check_prefix(prefix, err);
    if (rc != CS_OK)
        return rc;
    if (opt->threads < 32 || opt->threads > 1024 || opt->threads % 32)
        return cs_error_set(err, CS_EINVAL, "threads", "threads per block must be a multiple of "
                            "32 in [32, 1024], not %d", opt->threads);
    if (opt->elem < CS_CUDA_FLOAT || opt->elem > CS_CUDA_INT32)
        return cs_error_set(err, CS_EINVAL, "elem", "unknown element type %d", (int)opt->elem);
    if (a->ranks > CS_CUDA_MAX_RANKS)
        return cs_error_set(err, CS_ELIMIT, "ranks", "the CUDA lowering is for the GPUs of one "
                            "node: %d ranks exceeds %d (MSCCL XML has no such limit)", a->ranks,
                            CS_CUDA_MAX_RANKS);
    if (rank_lo < 0 || rank_hi < rank_lo || rank_hi >= a->ranks)
        return cs_error_set(err, CS_EINVAL, "ranks", "ranks %d-%d are not within 0-%d", rank_lo,
                            rank_hi, a->ranks - 1);
    char upper[64];
    size_t pl = strlen(prefix);
    for (size_t k = 0; k <= pl; k++)
        upper[k] = (char)toupper((unsigned char)prefix[k]);
    cg_plan *p;
    if ((rc = codegen_plan_build(a, t, &p, err)) != CS_OK)
        return rc;
    static const char *const elem_c[] = {"float", "double", "int"};
    static const char *const vec_cuda[] = {"float4", "double2", "int4"};
    static const char *const vadd_cuda[] = {
        "(v).x += (w).x, (v).y += (w).y, (v).z += (w).z, (v).w += (w).w",
        "(v).x += (w).x, (v).y += (w).y",
        "(v).x += (w).x, (v).y += (w).y, (v).z += (w).z, (v).w += (w).w"};
    static const int lanes[] = {4, 2, 4};
    cs_buf b = {0};
    cs_buf_printf(&b, "/*\n * Generated by collsynth: %s on %s (%d ranks, %d chunks per rank, %d steps,"
              " method %s).\n * SCCL lowering: one kernel, push model over peer pointers, "
              "per-transfer\n * flags, 128-bit tiled copies with fused reductions.  Compile with\n"
              " *   nvcc -arch=sm_80 -c this.cu           (CUDA)\n"
              " *   cc -std=c11 -DCS_HOST_BUILD -x c -c this.cu -pthread   (host threads)\n"
              " * Thread blocks of ranks %d-%d%s.  See docs/codegen.md for the API.\n */\n",
              collective_kind_name(a->collective.kind), a->topology[0] ? a->topology : "?",
              a->ranks, a->chunks, a->steps, a->method[0] ? a->method : "?", rank_lo, rank_hi,
              rank_lo == 0 && rank_hi == a->ranks - 1 ? " (all)" : ": a slice, run with run_slice");
    cs_buf_printf(&b, "#ifndef %sGENERATED\n#define %sGENERATED 1\n", upper, upper);
    cs_buf_printf(&b, "#define %sRANKS %d\n#define %sCHUNKS %d\n#define %sI_CHUNKS %d\n"
              "#define %sO_CHUNKS %d\n#define %sKIND \"%s\"\n#define %sROOT %d\n"
              "#define %sELEM %s\n#define %sVEC_LANES %d\n"
              "#define %sRANK_LO %d\n#define %sRANK_HI %d\n",
              upper, p->ranks, upper, p->chunks, upper, p->i_chunks, upper, p->o_chunks, upper,
              collective_kind_name(p->kind), upper, p->root, upper, elem_c[opt->elem], upper,
              lanes[opt->elem], upper, rank_lo, upper, rank_hi);
    cs_buf tables = {0};
    if ((rc = emit_tables(&tables, p, prefix, upper, rank_lo, rank_hi)) != CS_OK || tables.failed) {
        free(tables.s);
        free(b.s);
        codegen_plan_free(p);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory generating CUDA");
    }
    char threads[16];
    snprintf(threads, sizeof threads, "%d", opt->threads);
    const char *keys[] = {"@P@", "@U@", "@TABLES@", "@CUDAVEC@", "@CUDAVADD@", "@THREADS@"};
    const char *vals[] = {prefix, upper, tables.s ? tables.s : "", vec_cuda[opt->elem],
                          vadd_cuda[opt->elem], threads};
    /* the tables themselves contain @P@/@U@-free text: expand them first */
    expand(&b, runtime_template, keys, vals, 6);
    cs_buf_printf(&b, "#endif /* %sGENERATED */\n", upper);
    free(tables.s);
    codegen_plan_free(p);
    if (b.failed) {
        free(b.s);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory generating CUDA");
    }
    *out = b.s;
    if (len)
        *len = b.len;
    return CS_OK;
}

/*
 * cli_codegen.c - `collsynth codegen`: lowers an Algorithm JSON (or one
 * algorithm of a Result's frontier) to MSCCL XML or to a CUDA source.
 *
 * The algorithm is verified first whenever its topology is known (from
 * --topology, a Result's own "topology", or the algorithm's "topology" name
 * when it is a builtin), so a file edited by
 * hand cannot turn into a document that hangs a training job.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cuda_gen.h"
#include "msccl_xml.h"
#include "verify.h"

static const char codegen_help[] =
    "usage: collsynth codegen ALGORITHM.json --format msccl-xml|cuda [options]\n"
    "\n"
    "Lowers a verified algorithm to something a training job can run.\n"
    "ALGORITHM.json is an Algorithm (CONTRACT.md section 3) or a Result; for a\n"
    "Result the frontier algorithm is chosen with --index or --size.\n"
    "\n"
    "  --format F         msccl-xml (MSCCL algorithm XML) or cuda (.cu source)\n"
    "  --topology T       topology (builtin name, JSON file or text); default: a\n"
    "                     Result's own \"topology\", else the algorithm's\n"
    "                     \"topology\" name when it is a builtin\n"
    "  --runtime R        msccl-xml: auto (default: a form both runtimes accept),\n"
    "                     msccl (NCCL fork) or msccl-executor\n"
    "  --min-bytes N      msccl-xml: smallest buffer this algorithm is used for (default 0)\n"
    "  --max-bytes N      msccl-xml: largest buffer (default 0 = no limit)\n"
    "  --proto P          msccl-xml: Simple (default), LL or LL128\n"
    "  --name NAME        msccl-xml: the algo name attribute\n"
    "  --gpu-sms N        msccl-xml: the target GPU's SMs; at most 2N thread blocks\n"
    "                     per rank (all must be resident at once; default: the\n"
    "                     runtime's own limit, 216 in the NCCL fork = an A100's 108)\n"
    "  --elem TYPE        cuda: float (default), double or int32\n"
    "  --prefix P         cuda: prefix of the generated identifiers (default collsynth_)\n"
    "  --index K          Result input: the K-th frontier algorithm (default 0)\n"
    "  --size BYTES       Result input: the frontier algorithm fastest for BYTES\n"
    "  --frontier-dir DIR Result input, msccl-xml: one document per frontier point\n"
    "                     that is the cheapest for some size, with minBytes/maxBytes\n"
    "                     set to its size range; prints the MSCCL_XML_FILES value\n"
    "                     (msccl and auto: at most 4, the runtime's limit: the 4 that\n"
    "                     lose least over all sizes; the dropped ones are named)\n"
    "  --ranks A-B        only ranks A..B (or --ranks R): an MSCCL slice (the same\n"
    "                     <algo>, those ranks' <gpu> elements) or a CUDA slice\n"
    "                     (those ranks' thread blocks, run with run_slice)\n"
    "  -o FILE            write to FILE instead of stdout; FILE appears (or is\n"
    "                     replaced) only once the whole document is written\n"
    "\n"
    "Exit codes: 0 written, 1 invalid algorithm or unsupported combination,\n"
    "2 bad input or a runtime limit exceeded, 3 internal error.\n";

/* The output, written as it is generated (a 1024-rank document is hundreds
 * of MB).  -o FILE is written to a temporary file in FILE's directory and
 * renamed over FILE once complete, so an error part way (a rank over a
 * runtime limit after earlier ranks were written, a full disk) never leaves
 * a file that looks like a whole document, and an existing FILE stays as it
 * was.  Standard output and files that are not regular (a pipe, /dev/null)
 * are written in place: there an error part way leaves a document without
 * its closing "</algo>", and the exit code says it failed. */
typedef cli_out out_file;   /* cli_output.c: temp file + rename, Ctrl-C cleanup */

#define OUT_BUFFER (1 << 20)

static int out_open(out_file *o, const char *cmd, const char *path)
{
    int code = cli_out_open(o, cmd, path);
    if (code == CLI_EXIT_OK)
        setvbuf(o->f, NULL, _IOFBF, OUT_BUFFER);
    return code;
}

/* cs_write_fn: the generators' output goes straight to the file. */
static int out_write(void *ctx, const char *data, size_t len)
{
    out_file *o = ctx;
    if (o->error)
        return CS_EIO;
    errno = 0; /* the failed write's own errno, not an earlier call's */
    if (fwrite(data, 1, len, o->f) != len) {
        o->error = errno ? errno : EIO;
        return CS_EIO;
    }
    return CS_OK;
}

/* Finishes the output: with ok, flushes and puts the file in place (a write
 * error is reported here: CLI_EXIT_USAGE); without, discards the temporary
 * file.  Returns CLI_EXIT_OK or the exit code of the failure it reported. */
static int out_close(out_file *o, bool ok) { return cli_out_close(o, ok); }

/* A whole text (CUDA sources: at most 64 ranks, small). */
static int write_text(const char *cmd, const char *text, size_t len, const char *path)
{
    out_file o;
    int code = out_open(&o, cmd, path);
    if (code != CLI_EXIT_OK)
        return code;
    out_write(&o, text, len);
    return out_close(&o, true);
}

/* Lowers to MSCCL XML straight into the output.  A generation error is
 * reported (the output discarded); a write error is reported by out_close. */
static int write_xml(const char *cmd, const cs_algorithm *a, const cs_topology *t,
                     const cs_msccl_options *mo, int lo, int hi, const char *path)
{
    out_file o;
    int code = out_open(&o, cmd, path);
    if (code != CLI_EXIT_OK)
        return code;
    cs_error err;
    cs_error_clear(&err);
    int rc = msccl_xml_write_ranks(a, t, mo, lo, hi, out_write, &o, &err);
    if (rc != CS_OK && !o.error)
        code = cli_report_error(cmd, "cannot lower to MSCCL XML", rc, &err);
    int wcode = out_close(&o, rc == CS_OK);
    return code != CLI_EXIT_OK ? code : wcode;
}

/* Reads an Algorithm or a Result without its DOM (algorithm_doc_load_file:
 * a 1M-send result is 1.7 GB as a DOM).  Errors are reported here. */
static int load_doc(const char *cmd, const char *path, cs_algorithm **alg, cs_result **res,
                    cs_error *err)
{
    json_error_t jerr;
    bool is_result = false;
    int rc = algorithm_doc_load_file(path, alg, res, &is_result, &jerr, err);
    if (rc == CS_OK)
        return CLI_EXIT_OK;
    if (jerr.text[0]) {
        fprintf(stderr, "collsynth %s: %s: line %d: %s\n", cmd, path, jerr.line, jerr.text);
        return CLI_EXIT_USAGE;
    }
    if (rc == CS_EIO)
        return cli_report_error(cmd, "cannot read the algorithm", rc, err);
    int code = cli_report_error(cmd, is_result ? "not a usable result" : "not a usable algorithm",
                                rc, err);
    return code == CLI_EXIT_NEGATIVE ? CLI_EXIT_USAGE : code;
}

/* The topology of the document when --topology is not given: the one it
 * carries (cli_document_topology); without one the algorithm cannot be
 * verified, which a note says. */
static int document_topology(const char *cmd, const cs_result *r, const cs_algorithm *a,
                             cs_topology **t)
{
    char why[400] = "";
    int code = cli_document_topology(cmd, r, a, t, why, sizeof why);
    if (code == CLI_EXIT_OK && !*t)
        fprintf(stderr, "collsynth %s: note: %s; the algorithm is not verified and every link "
                        "gets one channel (give --topology)\n", cmd, why);
    return code;
}

/* Loads an Algorithm, or picks one out of a Result, and its topology: the
 * one given (--topology, already in *t), else the one the document carries,
 * else none (*t NULL). */
static int load_input(const char *cmd, const char *path, int index, double size,
                      cs_algorithm **out, cs_topology **t)
{
    cs_error err;
    cs_error_clear(&err);
    cs_algorithm *alg = NULL;
    cs_result *r = NULL;
    int rc = load_doc(cmd, path, &alg, &r, &err);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (!*t && (rc = document_topology(cmd, r, alg, t)) != CLI_EXIT_OK) {
        algorithm_free(alg);
        result_free(r);
        return rc;
    }
    if (r) {
        const cs_algorithm *pick = NULL;
        if (size > 0) {
            if (!*t) {
                result_free(r);
                return cli_usage_error(cmd, "--size needs the topology (--topology)");
            }
            pick = result_best_for_size(r, *t, size);
        } else if (index >= 0 && index < r->nalgs) {
            pick = r->algs[index];
        }
        if (!pick) {
            int n = r->nalgs;
            result_free(r);
            return cli_usage_error(cmd, "the result's frontier has %d algorithm(s); no algorithm "
                                   "at index %d", n, index);
        }
        rc = algorithm_clone(pick, out, &err);
        result_free(r);
        if (rc != CS_OK)
            return cli_report_error(cmd, "cannot copy the algorithm", rc, &err);
        return CLI_EXIT_OK;
    }
    *out = alg;
    return CLI_EXIT_OK;
}

/* mkdir -p: the documents' directory is created (a deployment path such as
 * /opt/algos/job42 usually does not exist yet); when that fails, says which
 * component and why. */
static int make_dirs(const char *cmd, const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        fprintf(stderr, "collsynth %s: --frontier-dir: path too long\n", cmd);
        return CLI_EXIT_USAGE;
    }
    for (char *p = path + 1;; p++) {
        bool end = *p == '\0';
        if (*p != '/' && !end)
            continue;
        char saved = *p;
        *p = '\0';
        struct stat st;
        if (stat(path, &st) != 0) {
            if (mkdir(path, 0777) != 0 && errno != EEXIST) {
                fprintf(stderr, "collsynth %s: --frontier-dir: cannot create directory '%s': %s\n",
                        cmd, path, strerror(errno));
                return CLI_EXIT_USAGE;
            }
        } else if (!S_ISDIR(st.st_mode)) {
            fprintf(stderr, "collsynth %s: --frontier-dir: '%s' exists and is not a directory\n",
                    cmd, path);
            return CLI_EXIT_USAGE;
        }
        *p = saved;
        if (end)
            break;
    }
    return CLI_EXIT_OK;
}

/* --frontier-dir: every frontier point that is the cheapest somewhere, as a
 * document limited to its size range. */
static int write_frontier(const char *cmd, const char *path, const char *topo_spec,
                          const cs_msccl_options *base, const char *dir)
{
    cs_error err;
    cs_error_clear(&err);
    cs_algorithm *alg = NULL;
    cs_result *r = NULL;
    int rc = load_doc(cmd, path, &alg, &r, &err);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (!r) {
        algorithm_free(alg);
        return cli_usage_error(cmd, "--frontier-dir needs a Result (a JSON file with a "
                               "\"frontier\")");
    }
    if (make_dirs(cmd, dir) != CLI_EXIT_OK) {
        result_free(r);
        return CLI_EXIT_USAGE;
    }
    cs_topology *t = NULL;
    int code = CLI_EXIT_OK;
    if (r->nalgs == 0) {
        result_free(r);
        return cli_usage_error(cmd, "the result's frontier is empty");
    }
    /* the size ranges need the topology's costs: the one given, else the
     * result's own */
    if (topo_spec) {
        code = cli_load_topology(cmd, topo_spec, &t);
    } else {
        char why[400] = "";
        code = cli_document_topology(cmd, r, NULL, &t, why, sizeof why);
        if (code == CLI_EXIT_OK && !t)
            code = cli_usage_error(cmd, "--frontier-dir needs the topology: %s (give "
                                   "--topology)", why);
    }
    if (code != CLI_EXIT_OK) {
        result_free(r);
        return code;
    }
    /* the old runtime loads at most 4 documents: keep the 4 that lose least */
    int cap = base->runtime == CS_MSCCL_RUNTIME_EXECUTOR ? 0 : CS_MSCCL_MAX_ALGORITHMS;
    cs_byte_range *ranges = calloc((size_t)r->nalgs, sizeof *ranges);
    cs_byte_range *all = calloc((size_t)r->nalgs, sizeof *all);
    int dropped = 0;
    if (!ranges || !all || msccl_frontier_ranges(r, t, all, &err) != CS_OK ||
        msccl_frontier_ranges_limited(r, t, cap, ranges, &dropped, &err) != CS_OK) {
        free(ranges);
        free(all);
        result_free(r);
        topology_free(t);
        return cli_report_error(cmd, "cannot compute size ranges", CS_ENOMEM, &err);
    }
    for (int i = 0; i < r->nalgs && dropped; i++) {
        if (!all[i].best || ranges[i].best)
            continue;
        const cs_algorithm *a = r->algs[i];
        char upto[64] = "up";
        if (all[i].max_bytes)
            snprintf(upto, sizeof upto, "below %lld", all[i].max_bytes);
        fprintf(stderr, "collsynth %s: the msccl runtime loads at most %d algorithms: dropped "
                "frontier point %d (S=%d R=%d C=%d, the cheapest from %lld bytes %s); the %d "
                "kept lose least over all sizes\n", cmd, CS_MSCCL_MAX_ALGORITHMS, i, a->steps,
                a->rounds, a->chunks, all[i].min_bytes, upto, CS_MSCCL_MAX_ALGORITHMS);
    }
    free(all);
    int written = 0;
    for (int i = 0; i < r->nalgs && code == CLI_EXIT_OK; i++) {
        if (!ranges[i].best)
            continue;
        const cs_algorithm *a = r->algs[i];
        if ((rc = algorithm_verify(t, a, &err)) != CS_OK) {
            code = cli_report_error(cmd, "a frontier algorithm is not valid", rc, &err);
            break;
        }
        cs_msccl_options o = *base;
        o.min_bytes = ranges[i].min_bytes;
        o.max_bytes = ranges[i].max_bytes;
        if (o.runtime == CS_MSCCL_RUNTIME_EXECUTOR && o.max_bytes > 0)
            o.max_bytes--; /* the executor's maxBytes is inclusive */
        char name[128], file[4096];
        snprintf(name, sizeof name, "collsynth-%s-%s-S%d-R%d-C%d", a->method,
                 collective_kind_name(a->collective.kind), a->steps, a->rounds, a->chunks);
        if (!base->name)
            o.name = name;
        snprintf(file, sizeof file, "%s/%s.xml", dir, name);
        code = write_xml(cmd, a, t, &o, 0, a->ranks - 1, file);
        if (code == CLI_EXIT_OK) {
            if (ranges[i].max_bytes)
                fprintf(stderr, "collsynth %s: %s: sizes [%lld, %lld)\n", cmd, file,
                        ranges[i].min_bytes, ranges[i].max_bytes);
            else
                fprintf(stderr, "collsynth %s: %s: sizes from %lld up\n", cmd, file,
                        ranges[i].min_bytes);
            printf("%s%s", written ? ":" : "MSCCL_XML_FILES=", file);
            written++;
        }
    }
    if (written)
        printf("\n");
    free(ranges);
    result_free(r);
    topology_free(t);
    return code;
}

int cli_cmd_codegen(int argc, char **argv, const cli_globals *g)
{
    (void)g;
    const char *cmd = "codegen";
    const char *path = NULL, *format = NULL, *topo_spec = NULL, *runtime = NULL;
    const char *min_s = NULL, *max_s = NULL, *proto = NULL, *name = NULL, *elem = NULL;
    const char *prefix = NULL, *index_s = NULL, *size_s = NULL, *out_path = NULL;
    const char *frontier_dir = NULL, *ranks_s = NULL, *sms_s = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int m;
        if (cli_is_help(argv[i])) {
            fputs(codegen_help, stdout);
            return CLI_EXIT_OK;
        }
        struct {
            const char *name;
            const char **dst;
        } opts[] = {{"--format", &format},   {"--topology", &topo_spec}, {"--runtime", &runtime},
                    {"--min-bytes", &min_s}, {"--max-bytes", &max_s},   {"--proto", &proto},
                    {"--name", &name},       {"--elem", &elem},         {"--prefix", &prefix},
                    {"--index", &index_s},   {"--size", &size_s},       {"-o", &out_path},
                    {"--frontier-dir", &frontier_dir}, {"--ranks", &ranks_s},
                    {"--gpu-sms", &sms_s}};
        bool matched = false;
        for (size_t k = 0; k < sizeof opts / sizeof opts[0] && !matched; k++) {
            m = cli_option(cmd, argc, argv, &i, opts[k].name, &v);
            if (m < 0)
                return CLI_EXIT_USAGE;
            if (m > 0) {
                *opts[k].dst = v;
                matched = true;
            }
        }
        if (matched)
            continue;
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
        } else if (!path) {
            path = argv[i];
        } else {
            return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
        }
    }
    if (!path)
        return cli_usage_error(cmd, "missing ALGORITHM (a JSON file)");
    if (!format)
        return cli_usage_error(cmd, "missing --format (msccl-xml or cuda)");
    bool xml = strcmp(format, "msccl-xml") == 0;
    if (!xml && strcmp(format, "cuda") != 0)
        return cli_usage_error(cmd, "--format must be msccl-xml or cuda, not '%s'", format);
    if (!xml && (runtime || min_s || max_s || proto || name || sms_s))
        return cli_usage_error(cmd, "--runtime, --min-bytes, --max-bytes, --proto, --name and "
                               "--gpu-sms apply to --format msccl-xml");
    if (xml && (elem || prefix))
        return cli_usage_error(cmd, "--elem and --prefix apply to --format cuda");
    cs_error err;
    cs_error_clear(&err);
    cs_msccl_options mo;
    msccl_options_default(&mo);
    cs_cuda_options co;
    cuda_options_default(&co);
    double bytes;
    if (runtime && msccl_runtime_from_name(runtime, &mo.runtime, &err) != CS_OK)
        return cli_usage_error(cmd, "%s", err.message);
    if (min_s) {
        if (!cli_parse_size(min_s, &bytes) || bytes < 0)
            return cli_usage_error(cmd, "--min-bytes '%s' is not a size", min_s);
        mo.min_bytes = (long long)bytes;
    }
    if (max_s) {
        if (!cli_parse_size(max_s, &bytes) || bytes < 0)
            return cli_usage_error(cmd, "--max-bytes '%s' is not a size", max_s);
        mo.max_bytes = (long long)bytes;
    }
    if (sms_s && (!cli_parse_int(sms_s, &mo.gpu_sms) || mo.gpu_sms < 1 || mo.gpu_sms > 4096))
        return cli_usage_error(cmd, "--gpu-sms '%s' is not a GPU's SM count (1..4096)", sms_s);
    mo.proto = proto;
    mo.name = name;
    if (elem && cuda_elem_from_name(elem, &co.elem, &err) != CS_OK)
        return cli_usage_error(cmd, "%s", err.message);
    co.prefix = prefix;
    int index = 0;
    double size = 0;
    if (index_s && (!cli_parse_int(index_s, &index) || index < 0))
        return cli_usage_error(cmd, "--index '%s' is not a non-negative integer", index_s);
    if (size_s && (!cli_parse_size(size_s, &size) || size <= 0))
        return cli_usage_error(cmd, "--size '%s' is not a size", size_s);

    int rank_lo = -1, rank_hi = -1;
    if (ranks_s) {
        char lo[32], hi[32];
        const char *dash = strchr(ranks_s, '-');
        size_t n = dash ? (size_t)(dash - ranks_s) : strlen(ranks_s);
        if (n >= sizeof lo || (dash && strlen(dash + 1) >= sizeof hi))
            return cli_usage_error(cmd, "--ranks '%s' is not R or A-B", ranks_s);
        memcpy(lo, ranks_s, n);
        lo[n] = 0;
        snprintf(hi, sizeof hi, "%s", dash ? dash + 1 : lo);
        if (!cli_parse_int(lo, &rank_lo) || !cli_parse_int(hi, &rank_hi) || rank_lo < 0 ||
            rank_hi < rank_lo)
            return cli_usage_error(cmd, "--ranks '%s' is not R or A-B with A <= B", ranks_s);
    }
    if (frontier_dir) {
        if (!xml || min_s || max_s || index_s || size_s || out_path || ranks_s)
            return cli_usage_error(cmd, "--frontier-dir goes with --format msccl-xml and sets "
                                   "the sizes itself (no --min-bytes, --max-bytes, --index, "
                                   "--size, --ranks or -o)");
        return write_frontier(cmd, path, topo_spec, &mo, frontier_dir);
    }
    cs_topology *t = NULL;
    int code = CLI_EXIT_OK;
    if (topo_spec && (code = cli_load_topology(cmd, topo_spec, &t)) != CLI_EXIT_OK)
        return code;
    cs_algorithm *a = NULL;
    if ((code = load_input(cmd, path, index, size, &a, &t)) != CLI_EXIT_OK) {
        topology_free(t);
        return code;
    }
    int rc = CS_OK;
    if (t) {
        rc = algorithm_verify(t, a, &err);
        if (rc != CS_OK)
            code = cli_report_error(cmd, "the algorithm is not valid on this topology", rc, &err);
    }
    if (rc == CS_OK && ranks_s && rank_hi >= a->ranks) {
        code = cli_usage_error(cmd, "--ranks %s: the algorithm has ranks 0-%d", ranks_s,
                               a->ranks - 1);
        rc = CS_EINVAL;
    }
    if (rc == CS_OK) {
        int lo = ranks_s ? rank_lo : 0, hi = ranks_s ? rank_hi : a->ranks - 1;
        /* a whole document in one window, as the daemon writes it: cluster
         * ranks have so many peers that small windows plan most sends many
         * times (msccl_xml.h, window_sends) */
        if (!ranks_s)
            mo.window_sends = 1L << 22;
        if (xml) {
            code = write_xml(cmd, a, t, &mo, lo, hi, out_path);
        } else {
            char *text = NULL;
            size_t len = 0;
            rc = cuda_generate_ranks(a, t, &co, lo, hi, &text, &len, &err);
            if (rc != CS_OK)
                code = cli_report_error(cmd, "cannot lower to CUDA", rc, &err);
            else
                code = write_text(cmd, text, len, out_path);
            free(text);
        }
    }
    algorithm_free(a);
    topology_free(t);
    return code;
}

/* Tests of the MSCCL XML interpreter: hand-written documents (right, wrong,
 * deadlocking, malformed) and every generated document of the codegen
 * matrix (each collective on the DGX-1 from SMT, TACOS and a baseline, and
 * schedules on other topologies), each also generated as per-rank slices
 * that are reassembled and run, and checked against the runtimes' limits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "check_main.h"
#include "codegen_testutil.h"
#include "msccl_check.h"
#include "msccl_interp.h"
#include "msccl_xml.h"
#include "smt.h"
#include "tacos.h"
#include "verify.h"

/* Two-rank allreduce of one chunk, written by hand: each rank sends its
 * input, then receives the peer's and adds its own input into the output. */
#define AR2_HEAD                                                                          \
    "<algo name=\"ar2\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"1\" ngpus=\"2\" " \
    "coll=\"allreduce\" inplace=\"0\" outofplace=\"1\" minBytes=\"0\" maxBytes=\"0\">\n"
#define AR2_GPU(id, peer, first, second)                                                  \
    " <gpu id=\"" #id "\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\">\n"                 \
    "  <tb id=\"0\" send=\"" #peer "\" recv=\"" #peer "\" chan=\"0\">\n" first second        \
    "  </tb>\n </gpu>\n"
#define SEND0 "   <step s=\"%d\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
#define RRC0 "   <step s=\"%d\" type=\"rrc\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
#define RECV0 "   <step s=\"%d\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"

static char *doc2(const char *first, const char *second)
{
    /* both ranks run the same two steps (numbered 0 and 1) */
    char a[512], b[512];
    snprintf(a, sizeof a, first, 0);
    snprintf(b, sizeof b, second, 1);
    size_t n = 4096;
    char *out = malloc(n);
    snprintf(out, n,
             AR2_HEAD " <gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\">\n"
                      "  <tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">\n%s%s  </tb>\n </gpu>\n"
                      " <gpu id=\"1\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\">\n"
                      "  <tb id=\"0\" send=\"0\" recv=\"0\" chan=\"0\">\n%s%s  </tb>\n </gpu>\n"
                      "</algo>\n",
             a, b, a, b);
    return out;
}

static int run_text(const char *text, const cs_msccl_interp_options *o, cs_error *err)
{
    cs_msccl_doc *d;
    int rc = msccl_doc_parse(text, strlen(text), &d, err);
    if (rc != CS_OK)
        return rc;
    rc = msccl_interp_check(d, o, NULL, err);
    msccl_doc_free(d);
    return rc;
}

START_TEST(handwritten_allreduce_runs_right)
{
    char *x = doc2(SEND0, RRC0);
    cs_error err;
    cs_msccl_interp_options o;
    msccl_interp_options_default(&o);
    ck_assert_msg(run_text(x, &o, &err) == CS_OK, "%s", err.message);
    o.type = CS_INTERP_INT64;
    o.elems_per_chunk = 5;
    ck_assert_msg(run_text(x, &o, &err) == CS_OK, "%s", err.message);
    /* the document is out of place only */
    o.inplace = true;
    ck_assert_int_eq(run_text(x, &o, &err), CS_EINVAL);
    cs_msccl_doc *d;
    ck_assert_int_eq(msccl_doc_parse(x, strlen(x), &d, &err), CS_OK);
    ck_assert_int_eq(msccl_doc_ngpus(d), 2);
    ck_assert_str_eq(msccl_doc_coll(d), "allreduce");
    ck_assert_int_eq(msccl_doc_rank_tbs(d, 1), 1);
    ck_assert_int_eq(msccl_doc_rank_max_steps(d, 1), 2);
    ck_assert(msccl_doc_max_bytes(d) == 0);
    msccl_doc_free(d);
    free(x);
}
END_TEST

START_TEST(wrong_result_is_reported)
{
    /* receive without the reduction: the output misses the own input */
    char *x = doc2(SEND0, RECV0);
    cs_error err;
    ck_assert_int_eq(run_text(x, NULL, &err), CS_EVERIFY);
    ck_assert_msg(strstr(err.message, "wrong result: rank 0 output chunk 0"), "%s", err.message);
    free(x);
}
END_TEST

START_TEST(deadlock_is_reported)
{
    /* both ranks receive before they send */
    char *x = doc2(RRC0, SEND0);
    cs_error err;
    ck_assert_int_eq(run_text(x, NULL, &err), CS_EVERIFY);
    ck_assert_msg(strstr(err.message, "deadlock: 2 thread blocks") &&
                  strstr(err.message, "waits for a message from rank 1"), "%s", err.message);
    free(x);
}
END_TEST

START_TEST(fifo_capacity_is_modelled)
{
    /* each rank sends twice before receiving twice: needs room for two */
    const char *text =
        "<algo name=\"x\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" "
        "coll=\"allreduce\" inplace=\"0\">\n"
        "<gpu id=\"0\" i_chunks=\"2\" o_chunks=\"2\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">\n"
        "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "<step s=\"1\" type=\"s\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "<step s=\"2\" type=\"rrc\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "<step s=\"3\" type=\"rrc\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "</tb></gpu>\n"
        "<gpu id=\"1\" i_chunks=\"2\" o_chunks=\"2\" s_chunks=\"0\"><tb id=\"0\" send=\"0\" recv=\"0\" chan=\"0\">\n"
        "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "<step s=\"1\" type=\"s\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "<step s=\"2\" type=\"rrc\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "<step s=\"3\" type=\"rrc\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "</tb></gpu></algo>\n";
    cs_error err;
    cs_msccl_interp_options o;
    msccl_interp_options_default(&o);
    ck_assert_int_eq(run_text(text, &o, &err), CS_EVERIFY);
    ck_assert_msg(strstr(err.message, "waits for room to send to rank"), "%s", err.message);
    o.fifo_capacity = 2;
    ck_assert_msg(run_text(text, &o, &err) == CS_OK, "%s", err.message);
    /* the same as steps of two chunks streams them: it needs the same room */
    const char *merged =
        "<algo name=\"x\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" "
        "coll=\"allreduce\" inplace=\"0\">\n"
        "<gpu id=\"0\" i_chunks=\"2\" o_chunks=\"2\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">\n"
        "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"2\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "<step s=\"1\" type=\"rrc\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"2\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "</tb></gpu>\n"
        "<gpu id=\"1\" i_chunks=\"2\" o_chunks=\"2\" s_chunks=\"0\"><tb id=\"0\" send=\"0\" recv=\"0\" chan=\"0\">\n"
        "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"2\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "<step s=\"1\" type=\"rrc\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"%d\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "%s</tb></gpu></algo>\n";
    char buf[4096];
    snprintf(buf, sizeof buf, merged, 2, "");
    ck_assert_msg(run_text(buf, &o, &err) == CS_OK, "%s", err.message);
    o.fifo_capacity = 1;
    ck_assert_int_eq(run_text(buf, &o, &err), CS_EVERIFY);
    ck_assert_msg(strstr(err.message, "deadlock"), "%s", err.message);
    /* both ends must agree on the chunk count */
    o.fifo_capacity = 2;
    snprintf(buf, sizeof buf, merged, 1,
             "<step s=\"2\" type=\"rrc\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n");
    ck_assert_int_eq(run_text(buf, &o, &err), CS_EVERIFY);
    ck_assert_msg(strstr(err.message, "sender's step moves 2"), "%s", err.message);
}
END_TEST

/* Rank 0 has two blocks: block 1 forwards what block 0 received.  With the
 * dependency's hasdep set it runs; without it the flag is never raised. */
static char *dep_doc(int hasdep)
{
    char *out = malloc(4096);
    snprintf(out, 4096,
             "<algo name=\"b\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"1\" ngpus=\"3\" "
             "coll=\"broadcast\" inplace=\"0\" outofplace=\"1\">\n"
             "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\">\n"
             " <tb id=\"0\" send=\"-1\" recv=\"1\" chan=\"0\">\n"
             "  <step s=\"0\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"%d\"/>\n"
             " </tb>\n"
             " <tb id=\"1\" send=\"2\" recv=\"-1\" chan=\"0\">\n"
             "  <step s=\"0\" type=\"s\" srcbuf=\"o\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"0\" deps=\"0\" hasdep=\"0\"/>\n"
             " </tb>\n"
             "</gpu>\n"
             "<gpu id=\"1\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\">\n"
             " <tb id=\"0\" send=\"0\" recv=\"-1\" chan=\"0\">\n"
             "  <step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"1\"/>\n"
             " </tb>\n"
             " <tb id=\"1\" send=\"-1\" recv=\"-1\" chan=\"0\">\n"
             "  <step s=\"0\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"0\" deps=\"0\" hasdep=\"0\"/>\n"
             " </tb>\n"
             "</gpu>\n"
             "<gpu id=\"2\" i_chunks=\"0\" o_chunks=\"1\" s_chunks=\"0\">\n"
             " <tb id=\"0\" send=\"-1\" recv=\"0\" chan=\"0\">\n"
             "  <step s=\"0\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
             " </tb>\n"
             "</gpu>\n"
             "</algo>\n",
             hasdep);
    return out;
}

START_TEST(dependencies_follow_hasdep_flags)
{
    cs_collective c;
    collective_init(&c, CS_COLL_BROADCAST, 1);
    cs_error err;
    ck_assert_int_eq(collective_validate(&c, 3, &err), CS_OK);
    cs_msccl_interp_options o;
    msccl_interp_options_default(&o);
    o.collective = &c;
    char *good = dep_doc(1), *bad = dep_doc(0);
    ck_assert_msg(run_text(good, &o, &err) == CS_OK, "%s", err.message);
    ck_assert_int_eq(run_text(bad, &o, &err), CS_EVERIFY);
    ck_assert_msg(strstr(err.message, "rank 0 tb 1 step 0 (s) waits for thread block 0 step 0"),
                  "%s", err.message);
    /* a rooted collective needs its root */
    o.collective = NULL;
    ck_assert_int_eq(run_text(good, &o, &err), CS_EINVAL);
    /* and the collective must be the document's */
    cs_collective ag;
    collective_init(&ag, CS_COLL_ALLGATHER, -1);
    o.collective = &ag;
    ck_assert_int_eq(run_text(good, &o, &err), CS_EINVAL);
    ck_assert_msg(strstr(err.message, "coll \"broadcast\""), "%s", err.message);
    free(good);
    free(bad);
}
END_TEST

START_TEST(comments_declaration_quotes_and_entities_are_accepted)
{
    const char *text =
        "<?xml version=\"1.0\"?>\n<!-- a comment -->\n"
        "<algo name='a &amp; b &#65;' proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"1\" "
        "ngpus=\"2\" coll=\"allreduce\" inplace=\"0\">\n"
        "  <!-- rank 0 -->\n"
        " <gpu id=\"1\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\">\n"
        "  <tb id=\"0\" send=\"0\" recv=\"0\" chan=\"0\">\n"
        "   <step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "   <step s=\"1\" type=\"rrc\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" />\n"
        "  </tb>\n </gpu>\n"
        " <gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\">\n"
        "  <tb\tid=\"0\" send=\"1\" recv=\"1\" chan=\"0\">\n"
        "   <step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"></step>\n"
        "   <step s=\"1\" type=\"rrc\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "  </tb>\n </gpu>\n"
        "</algo>\n<!-- trailing -->\n";
    cs_error err;
    ck_assert_msg(run_text(text, NULL, &err) == CS_OK, "%s", err.message);
}
END_TEST

typedef struct bad_case {
    const char *text;
    const char *expect;
} bad_case;

#define STEP_OK "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>"
#define HEAD1 "<algo name=\"x\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"1\" ngpus=\"2\" coll=\"allreduce\" inplace=\"0\">"
#define GPU1 "<gpu id=\"1\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"></gpu>"

START_TEST(malformed_documents_are_rejected_clearly)
{
    static const bad_case cases[] = {
        {"", "empty document"},
        {"   \n  ", "empty document"},
        {"<algo", "unexpected end of input"},
        {HEAD1, "is not closed"},
        {HEAD1 "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"></tb></algo>", "does not match"},
        {"<algo name=\"x>", "unterminated attribute value"},
        {"<algo name=\"x\" name=\"y\"/>", "duplicate attribute"},
        {"<algo name=x/>", "in quotes"},
        {HEAD1 "hello</algo>", "unexpected text"},
        {HEAD1 "<!-- never closed </algo>", "unterminated comment"},
        {"<algo name=\"&bogus;\"/>", "unknown entity"},
        {"<gpu id=\"0\"/>", "not <algo>"},
        {HEAD1 "</algo><algo/>", "content after the root"},
        {"<algo name=\"x\" proto=\"Simple\" nchannels=\"1\" ngpus=\"2\" coll=\"allreduce\" inplace=\"0\"/>",
         "needs attribute nchunksperloop"},
        {"<algo name=\"x\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"1\" ngpus=\"two\" coll=\"allreduce\" inplace=\"0\"/>",
         "is not an integer"},
        {"<algo name=\"x\" proto=\"Fast\" nchannels=\"1\" nchunksperloop=\"1\" ngpus=\"2\" coll=\"allreduce\" inplace=\"0\"/>",
         "proto must be"},
        {"<algo name=\"x\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"1\" ngpus=\"2\" coll=\"sum\" inplace=\"0\"/>",
         "not a collective"},
        {HEAD1 GPU1 "</algo>", "no <gpu id=\"0\">"},
        {HEAD1 GPU1 GPU1 "</algo>", "appears twice"},
        {HEAD1 GPU1 "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"><tb id=\"0\" send=\"5\" recv=\"-1\" chan=\"0\"/></gpu></algo>",
         "out of range"},
        {HEAD1 GPU1 "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"><tb id=\"1\" send=\"1\" recv=\"-1\" chan=\"0\"/></gpu></algo>",
         "consecutive"},
        {HEAD1 GPU1 "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"><tb id=\"0\" send=\"0\" recv=\"-1\" chan=\"0\"/></gpu></algo>",
         "itself as a peer"},
        {HEAD1 GPU1 "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"0\">"
         "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\"/></tb></gpu></algo>",
         "needs attribute hasdep"},
        {HEAD1 GPU1 "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"0\">"
         "<step s=\"1\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/></tb></gpu></algo>",
         "numbered 0, 1"},
        {HEAD1 GPU1 "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"0\">"
         "<step s=\"0\" type=\"copy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/></tb></gpu></algo>",
         "unknown step type"},
        {HEAD1 GPU1 "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"0\">"
         "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"3\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/></tb></gpu></algo>",
         "outside the buffer"},
        {HEAD1 GPU1 "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"0\">"
         "<step s=\"0\" type=\"s\" srcbuf=\"x\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/></tb></gpu></algo>",
         "is not a buffer"},
        {HEAD1 GPU1 "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"0\">"
         "<step s=\"0\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/></tb></gpu></algo>",
         "recv=\"-1\""},
        {HEAD1 GPU1 "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"0\">"
         "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"4\" deps=\"0\" hasdep=\"0\"/></tb></gpu></algo>",
         "is not another thread block"},
        {HEAD1 GPU1 "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"0\">"
         "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"0\" deps=\"-1\" hasdep=\"0\"/></tb></gpu></algo>",
         "both or neither"},
        {HEAD1 GPU1 "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"0\">"
         STEP_OK "</tb><tb id=\"1\" send=\"1\" recv=\"-1\" chan=\"0\"/></gpu></algo>",
         "same peer and channel"},
        {HEAD1 GPU1 "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"><step/></gpu></algo>",
         "unexpected <step> in <gpu>"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cs_error err;
        cs_msccl_doc *d = (cs_msccl_doc *)&err;
        int rc = msccl_doc_parse(cases[k].text, strlen(cases[k].text), &d, &err);
        ck_assert_msg(rc == CS_EINVAL, "case %zu accepted (rc %d): %s", k, rc, cases[k].text);
        ck_assert_ptr_null(d);
        ck_assert_msg(strstr(err.message, cases[k].expect) != NULL,
                      "case %zu: message \"%s\" lacks \"%s\"", k, err.message, cases[k].expect);
    }
    /* errors name the line */
    const char *multi = HEAD1 "\n" GPU1 "\n<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\">\n"
                        "<tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"9\"/>\n</gpu></algo>";
    cs_error err;
    cs_msccl_doc *d;
    ck_assert_int_eq(msccl_doc_parse(multi, strlen(multi), &d, &err), CS_EINVAL);
    ck_assert_msg(strstr(err.message, "line 4") && strstr(err.message, "chan"), "%s", err.message);
    /* a document that is only not NUL-terminated where len ends is read to len */
    char buf[64];
    memset(buf, 'x', sizeof buf);
    memcpy(buf, "<algo", 5);
    ck_assert_int_eq(msccl_doc_parse(buf, 5, &d, &err), CS_EINVAL);
    /* deep nesting is bounded */
    char *deep = malloc(20000);
    size_t n = 0;
    for (int k = 0; k < 2000; k++)
        n += (size_t)sprintf(deep + n, "<a>");
    ck_assert_int_eq(msccl_doc_parse(deep, n, &d, &err), CS_EINVAL);
    ck_assert_msg(strstr(err.message, "nested too deeply"), "%s", err.message);
    free(deep);
}
END_TEST

/* The document of an algorithm for one runtime: whole, and as slices of 1
 * and of 3 ranks reassembled, which must be byte for byte the whole one;
 * every slice and the whole pass the runtime's limits (counted on the
 * text).  Returns the document (the caller frees it). */
static char *whole_and_slices(const cs_algorithm *a, const cs_topology *t, cs_msccl_runtime rt,
                              const char *label, size_t *len)
{
    cs_msccl_options mo;
    msccl_options_default(&mo);
    mo.runtime = rt;
    char *xml;
    cs_error err;
    int rc = msccl_xml_generate(a, t, &mo, &xml, len, &err);
    ck_assert_msg(rc == CS_OK, "%s (%s): %s", label, msccl_runtime_name(rt), err.message);
    cs_msccl_check_stats st;
    rc = msccl_check_limits(xml, *len, rt, &st, &err);
    ck_assert_msg(rc == CS_OK, "%s (%s): the generated document breaks a limit: %s", label,
                  msccl_runtime_name(rt), err.message);
    ck_assert_int_eq(st.gpus, a->ranks);
    static const int widths[] = {1, 3};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        char *re;
        size_t rlen;
        rc = cgt_reassemble_slices(a, t, &mo, widths[w], &re, &rlen, &err);
        ck_assert_msg(rc == CS_OK, "%s (%s), slices of %d: %s", label, msccl_runtime_name(rt),
                      widths[w], err.message);
        ck_assert_msg(rlen == *len && memcmp(re, xml, rlen) == 0,
                      "%s (%s): slices of %d ranks reassemble to another document", label,
                      msccl_runtime_name(rt), widths[w]);
        free(re);
    }
    /* one rank's slice on its own, as that rank's runtime reads it */
    for (int r = 0; r < a->ranks; r += a->ranks > 4 ? a->ranks / 4 : 1) {
        char *one;
        size_t olen;
        ck_assert_int_eq(msccl_xml_generate_ranks(a, t, &mo, r, r, &one, &olen, &err), CS_OK);
        rc = msccl_check_limits(one, olen, rt, &st, &err);
        ck_assert_msg(rc == CS_OK, "%s: slice of rank %d: %s", label, r, err.message);
        ck_assert_int_eq(st.gpus, 1);
        free(one);
    }
    return xml;
}

static void run_document(const char *xml, size_t len, const cs_collective *coll, const char *label,
                         bool int64_in_place)
{
    cs_error err;
    cs_msccl_doc *d;
    int rc = msccl_doc_parse(xml, len, &d, &err);
    ck_assert_msg(rc == CS_OK, "%s: generated XML rejected: %s", label, err.message);
    for (int mode = 0; mode < 2; mode++) {
        if (mode == 1 && !msccl_doc_inplace(d))
            continue;
        cs_msccl_interp_options o;
        msccl_interp_options_default(&o);
        o.collective = coll;
        o.inplace = mode;
        o.type = mode && int64_in_place ? CS_INTERP_INT64 : CS_INTERP_DOUBLE;
        cs_msccl_interp_stats st;
        rc = msccl_interp_check(d, &o, &st, &err);
        ck_assert_msg(rc == CS_OK, "%s (%s): %s", label, mode ? "in place" : "out of place",
                      err.message);
        ck_assert_int_gt(st.steps_executed, 0);
    }
    msccl_doc_free(d);
}

/* Every generated document of the matrix runs right, in and out of place,
 * on doubles and on int64, for every runtime that accepts it; its slices
 * reassemble to it. */
static void check_matrix(unsigned which)
{
    cgt_set set;
    cs_error err;
    int rc = cgt_build(&set, which, 0, &err);
    ck_assert_msg(rc == CS_OK, "building the algorithms failed: %s", err.message);
    ck_assert_int_ge(set.n, 8);
    static const cs_msccl_runtime rts[] = {CS_MSCCL_RUNTIME_MSCCL, CS_MSCCL_RUNTIME_AUTO,
                                           CS_MSCCL_RUNTIME_EXECUTOR};
    int checked = 0;
    for (int i = 0; i < set.n; i++) {
        const cgt_alg *x = &set.algs[i];
        for (size_t r = 0; r < sizeof rts / sizeof rts[0]; r++) {
            size_t len;
            /* every DGX-1 schedule here fits every runtime's limits */
            char *xml = whole_and_slices(x->alg, x->topo, rts[r], x->label, &len);
            char label[200];
            snprintf(label, sizeof label, "%s (%s)", x->label, msccl_runtime_name(rts[r]));
            run_document(xml, len, &x->coll, label, true);
            free(xml);
            checked++;
        }
    }
    ck_assert_int_ge(checked, set.n);
    cgt_free(&set);
}

START_TEST(generated_from_baselines_run_right) { check_matrix(CGT_BASELINE); }
END_TEST

START_TEST(generated_from_smt_frontier_run_right) { check_matrix(CGT_SMT); }
END_TEST

START_TEST(generated_from_tacos_run_right) { check_matrix(CGT_TACOS); }
END_TEST

/* Slices reassembled run right on other topologies too: TACOS on a torus
 * and a mesh, baselines on rings and a full mesh, SMT on a ring. */
START_TEST(slices_on_several_topologies_run_right)
{
    struct {
        const char *topo, *method, *kind;
        int chunks;
    } cases[] = {
        {"torus2d:4x4", "tacos", "allgather", 2},
        {"torus2d:4x4", "tacos", "allreduce", 1},
        {"mesh2d:3x4", "tacos", "reducescatter", 1},
        {"ring:12", "ring", "allreduce", 0},
        {"ring:12", "recursive-doubling", "allgather", 0},
        {"fc:16", "direct", "alltoall", 0},
        {"fc:9", "binomial-tree", "scatter", 0},
        {"ring:5", "smt", "allgather", 0},
    };
    static const cs_msccl_runtime rts[] = {CS_MSCCL_RUNTIME_MSCCL, CS_MSCCL_RUNTIME_EXECUTOR};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cs_error err;
        cs_topology *t;
        char label[160];
        snprintf(label, sizeof label, "%s %s on %s", cases[k].kind, cases[k].method,
                 cases[k].topo);
        ck_assert_msg(topology_builtin(cases[k].topo, &t, &err) == CS_OK, "%s: %s", label,
                      err.message);
        cs_coll_kind kind;
        ck_assert_int_eq(collective_kind_from_name(cases[k].kind, &kind), CS_OK);
        cs_collective c;
        collective_init(&c, kind, collective_kind_is_rooted(kind) ? 1 : -1);
        ck_assert_int_eq(collective_validate(&c, t->ranks, &err), CS_OK);
        cs_algorithm *a = NULL;
        cs_result *res = NULL;
        if (!strcmp(cases[k].method, "tacos")) {
            cs_tacos_options to;
            tacos_options_default(&to);
            to.chunks = cases[k].chunks;
            to.trials = 1;
            to.threads = 1;
            to.keep_sends = true;
            ck_assert_msg(tacos_synthesize(t, &c, &to, &res, &err) == CS_OK, "%s: %s", label,
                          err.message);
        } else if (!strcmp(cases[k].method, "smt")) {
            cs_smt_options so;
            smt_options_default(&so);
            so.k = 1;
            so.max_chunks = 2;
            so.threads = 1;
            so.total_time_limit_s = 8;
            so.instance_time_limit_s = 5;
            ck_assert_msg(smt_search(t, &c, &so, &res, &err) == CS_OK, "%s: %s", label,
                          err.message);
        } else {
            ck_assert_msg(baseline_generate(cases[k].method, t, &c, NULL, &a, &err) == CS_OK,
                          "%s: %s", label, err.message);
        }
        const cs_algorithm *alg = a;
        if (res) {
            ck_assert_int_ge(res->nalgs, 1);
            alg = res->algs[res->nalgs - 1];
        }
        ck_assert_msg(algorithm_verify(t, alg, &err) == CS_OK, "%s: %s", label, err.message);
        for (size_t r = 0; r < sizeof rts / sizeof rts[0]; r++) {
            size_t len;
            char *xml = whole_and_slices(alg, t, rts[r], label, &len);
            run_document(xml, len, &c, label, false);
            free(xml);
        }
        algorithm_free(a);
        result_free(res);
        collective_free(&c);
        topology_free(t);
    }
}
END_TEST

START_TEST(large_tacos_schedule_runs_right)
{
    /* a 64-rank torus, allreduce: TACOS' timed schedule (16,128 sends)
     * through both runtimes' documents and the interpreter, in and out of
     * place */
    cs_topology *t;
    cs_error err;
    ck_assert_int_eq(topology_builtin("torus2d:8x8", &t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLREDUCE, -1);
    cs_tacos_options to;
    tacos_options_default(&to);
    to.chunks = 2;
    to.trials = 1;
    to.threads = 1;
    to.keep_sends = true;
    cs_result *r;
    ck_assert_msg(tacos_synthesize(t, &c, &to, &r, &err) == CS_OK, "%s", err.message);
    ck_assert_int_ge(r->nalgs, 1);
    /* the executor's 64 steps per block need the messages spread over more
     * channels than the links have lanes */
    int nch[2];
    for (int rt = 0; rt < 2; rt++) {
        cs_msccl_options mo;
        msccl_options_default(&mo);
        mo.runtime = rt ? CS_MSCCL_RUNTIME_EXECUTOR : CS_MSCCL_RUNTIME_MSCCL;
        char *xml;
        size_t len;
        ck_assert_msg(msccl_xml_generate(r->algs[0], t, &mo, &xml, &len, &err) == CS_OK, "%s",
                      err.message);

        cs_msccl_doc *d;
        ck_assert_int_eq(msccl_doc_parse(xml, len, &d, &err), CS_OK);
        ck_assert_int_eq(msccl_doc_ngpus(d), 64);
        nch[rt] = msccl_doc_nchannels(d);
        for (int g = 0; g < 64; g++)
            ck_assert_int_le(msccl_doc_rank_max_steps(d, g), rt ? 64 : 256);
        cs_msccl_interp_options o;
        msccl_interp_options_default(&o);
        for (int inplace = 0; inplace < 2; inplace++) {
            o.inplace = inplace;
            ck_assert_msg(msccl_interp_check(d, &o, NULL, &err) == CS_OK, "%s", err.message);
        }
        msccl_doc_free(d);
        free(xml);
    }
    ck_assert_int_gt(nch[1], nch[0]);
    result_free(r);
    topology_free(t);
}
END_TEST

static Suite *msccl_interp_suite(void)
{
    Suite *s = suite_create("msccl_interp");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, handwritten_allreduce_runs_right);
    tcase_add_test(tc, wrong_result_is_reported);
    tcase_add_test(tc, deadlock_is_reported);
    tcase_add_test(tc, fifo_capacity_is_modelled);
    tcase_add_test(tc, dependencies_follow_hasdep_flags);
    tcase_add_test(tc, comments_declaration_quotes_and_entities_are_accepted);
    tcase_add_test(tc, malformed_documents_are_rejected_clearly);
    tcase_add_test(tc, generated_from_baselines_run_right);
    tcase_add_test(tc, generated_from_smt_frontier_run_right);
    tcase_add_test(tc, generated_from_tacos_run_right);
    tcase_add_test(tc, slices_on_several_topologies_run_right);
    tcase_add_test(tc, large_tacos_schedule_runs_right);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(msccl_interp_suite)

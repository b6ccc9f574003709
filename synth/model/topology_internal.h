/*
 * topology_internal.h - private interface between the parts of the topology
 * module: topology.c (construction, finalize, copies and transforms),
 * topology_json.c (the document form: parse, load, print) and
 * topology_builtin.c (the named families).  Not part of the public API:
 * include topology.h from anywhere else.
 *
 * What lives here is what more than one of those files must agree on: the
 * limits on single values (the parser reports them with JSON paths, the
 * builders with their own names), the finalize entry that maps duplicate
 * links back to their document position, and the rank-limited builtin
 * constructor that topology_load uses to refuse huge names before building.
 */
#ifndef CS_TOPOLOGY_INTERNAL_H
#define CS_TOPOLOGY_INTERNAL_H

#include <stdarg.h>
#include <stdio.h>

#include "topology.h"

/* Limits on single values, so absurd numbers are rejected instead of
 * overflowing later computations. */
#define CS_TOPOLOGY_MAX_LANES (1 << 20)
#define CS_TOPOLOGY_MAX_GBPS 1e9
#define CS_TOPOLOGY_MAX_ALPHA_US 1e9
/* Total directed links (including switch-derived ones): 8M links is ~256 MB. */
#define CS_TOPOLOGY_MAX_LINKS (1 << 23)

/* Formats a field path; long paths are cut (they only label errors). */
static inline void fieldf(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void fieldf(char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, CS_ERROR_FIELD_MAX, fmt, ap);
    va_end(ap);
}

/* In topology.c: checks one link's (or switch's) values against the limits
 * above; errors name "<path>.lanes", "<path>.gbps" or "<path>.alpha_us". */
int cs_topology_check_link_values(long long lanes, double gbps, double alpha_us,
                                  const char *path, cs_error *err);

/* In topology.c: topology_finalize, where origin (may be NULL) maps each
 * physical link, in the order added, to its index in the document's "links"
 * array, so a duplicate is reported as "links[i]". */
int cs_topology_finalize_with_origin(cs_topology *t, const int *origin, cs_error *err);

/* In topology_builtin.c: topology_builtin with a rank limit checked from the
 * parameters before anything is built (topology_load is the public way in). */
int cs_topology_builtin_limited(const char *spec, long max_ranks, cs_topology **out,
                                cs_error *err);

#endif

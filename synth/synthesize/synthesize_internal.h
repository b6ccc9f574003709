/*
 * synthesize_internal.h - private interface between the request parser and
 * dispatcher (synthesize.c) and the canonical form and key
 * (synthesize_canonical.c).  Not part of the public API: include
 * synthesize.h from anywhere else.
 */
#ifndef CS_SYNTHESIZE_INTERNAL_H
#define CS_SYNTHESIZE_INTERNAL_H

#include "synthesize.h"

/* The canonical collective document: kind, root when rooted, and for custom
 * collectives the sorted, deduplicated pre/postconditions.  Also what a
 * result reports as its collective.  Caller owns the reference. */
json_t *synth_canonical_collective(const cs_collective *c);

/* Builds r->canonical from the parsed request (topology, collective,
 * method_kind, method and the method's options must be set) and r->key, the
 * hex SHA-256 of synth_request_canonical_text(r).  On an error r->canonical
 * may be set; synth_request_free releases it. */
int synth_request_set_canonical(cs_synth_request *r, cs_error *err);

#endif

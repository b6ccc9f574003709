/*
 * topology_testutil.h - the topology a test or bench cannot run without:
 * topology_load() of a builtin name, Topology JSON text or a JSON file, or
 * the process stops with the spec and the loader's message.  One copy
 * instead of a load() in every test and bench.
 *
 *     cs_topology *t = test_topology("dgx1");   // never NULL
 *     ...
 *     topology_free(t);
 *
 * It exits (status 1) rather than failing a Check assertion so that benches,
 * which do not link Check, can use it too: inside a forked Check test the
 * test then fails as "early exit with return value 1", the message on
 * stderr.  A topology that does not load there is a broken test, not a
 * result to report.
 */
#ifndef CS_TOPOLOGY_TESTUTIL_H
#define CS_TOPOLOGY_TESTUTIL_H

#include "topology.h"

cs_topology *test_topology(const char *spec);

#endif

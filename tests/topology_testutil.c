/* topology_testutil.c - see topology_testutil.h. */
#include "topology_testutil.h"

#include <stdio.h>
#include <stdlib.h>

cs_topology *test_topology(const char *spec)
{
    cs_topology *t = NULL;
    cs_error err = {0};
    if (topology_load(spec, NULL, &t, &err) != CS_OK) {
        fprintf(stderr, "topology '%s' does not load: %s\n", spec, err.message);
        exit(1);
    }
    return t;
}

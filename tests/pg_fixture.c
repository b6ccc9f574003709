/* pg_fixture.c - see pg_fixture.h. */
#include "pg_fixture.h"

#include <check.h>
#include <stdbool.h>

#include "server_harness.h"

static cs_pg pg;
static bool pg_ok;

void pg_fixture_setup(void) { pg_ok = pg_start(&pg) == 0; }

void pg_fixture_teardown(void)
{
    if (pg_ok)
        pg_stop(&pg);
    pg_ok = false;
}

void pg_fixture_db(const char *name, char *url, size_t n)
{
    ck_assert_msg(pg_ok, "PostgreSQL did not start (the reason is on stderr)");
    ck_assert_msg(pg_create_db(&pg, name, url, n) == 0, "cannot create database %s", name);
}

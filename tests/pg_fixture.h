/*
 * pg_fixture.h - one throwaway PostgreSQL server for the test cases that run
 * a store or a fleet of daemons on PostgreSQL (server_harness.h's pg_start
 * and pg_stop), started once per test case and shared by its tests, each of
 * which takes a fresh database:
 *
 *     tcase_add_unchecked_fixture(tc, pg_fixture_setup, pg_fixture_teardown);
 *     START_TEST(fleet) {
 *         char url[256];
 *         pg_fixture_db("fleet", url, sizeof url);   // fails the test without a server
 *         ...
 *
 * Check's fixtures take no argument, so the server's state lives in
 * pg_fixture.c (one per test runner; the forked tests inherit it).
 */
#ifndef CS_PG_FIXTURE_H
#define CS_PG_FIXTURE_H

#include <stddef.h>

/* Starts the server; a failure is remembered (its reason is on stderr) and
 * reported by every pg_fixture_db. */
void pg_fixture_setup(void);
void pg_fixture_teardown(void);
/* Creates database `name` on the fixture's server and writes its URL; fails
 * the calling test when the server did not start or the database cannot be
 * created. */
void pg_fixture_db(const char *name, char *url, size_t n);

#endif

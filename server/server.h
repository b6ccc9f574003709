/*
 * server.h - collsynthd as a library object: start it with a configuration,
 * ask where it listens, stop it gracefully.  main.c adds flags, signals and
 * the startup line; tests and benches can embed it the same way.
 *
 *     cs_server *srv;
 *     if (server_start(&cfg, &log, &srv, &err) == CS_OK) {
 *         printf("listening on http://%s:%d\n", cfg.listen, server_port(srv));
 *         ... wait for SIGTERM ...
 *         server_stop(srv);      // stop accepting, let jobs end or re-queue
 *         server_free(srv);
 *     }
 */
#ifndef CS_SERVER_H
#define CS_SERVER_H

#include "config.h"
#include "log.h"

#define COLLSYNTHD_VERSION "0.1.0"

typedef struct cs_server cs_server;

int server_start(const cs_server_config *cfg, const cs_logger *log, cs_server **out,
                 cs_error *err);
int server_port(const cs_server *s);
const char *server_instance(const cs_server *s);
/* Graceful: stop accepting, give running jobs cfg->shutdown_grace_s, re-queue
 * the rest, answer parked requests, close the store. */
void server_stop(cs_server *s);
void server_free(cs_server *s);

#endif

/*
 * conntrack.c - deadlines for reading requests, which libmicrohttpd lacks.
 *
 * MHD's connection timeout is an idle timeout: a client that sends one header
 * byte every second holds its connection forever, and a thousand such
 * clients hold every connection slot.  So each connection carries a deadline
 * for the part of the request it is in:
 *   headers  complete within --header-timeout of the connection opening or of
 *            the previous response on it (so an idle kept-alive connection
 *            also ends after that long);
 *   body     complete within --body-timeout of the headers;
 *   busy     no deadline (the daemon is handling or parked on the request,
 *            or sending the answer: MHD's idle timeout covers that).
 * A sweeper thread shuts down the socket of a connection past its deadline
 * (with a 408 when nothing else was sent on it), which makes MHD close it.
 *
 * Socket safety: MHD reports a connection closed (NOTIFY_CONNECTION) before it
 * closes the socket, and that report waits for `lock`; the sweeper touches a
 * socket only while holding `lock`, so it can never hit a reused descriptor.
 */
#include "server_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef struct tracked {
    int fd;
    _Atomic int phase;          /* cs_conn_phase */
    _Atomic long long deadline_ms;
    bool cut;                   /* shut down by the sweeper (under lock) */
    struct tracked *prev, *next;
} tracked;

struct cs_conntrack {
    cs_server *srv;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    tracked *head;
    bool stop;
    pthread_t sweeper;
};

static long long now_ms(void) { return (long long)(cs_now() * 1e3); }

static void arm(tracked *t, cs_conn_phase phase, double timeout_s)
{
    atomic_store(&t->deadline_ms, now_ms() + (long long)(timeout_s * 1e3));
    atomic_store(&t->phase, (int)phase);
}

void conntrack_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                      enum MHD_ConnectionNotificationCode code)
{
    cs_server *s = cls;
    /* the acceptor counted it when MHD took it (acceptor_main) */
    if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        atomic_fetch_sub(&s->open_connections, 1);
    cs_conntrack *ct = s->conntrack;
    if (!ct)
        return;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        tracked *t = calloc(1, sizeof *t);
        if (!t)
            return; /* untracked: only MHD's idle timeout applies */
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        t->fd = ci ? ci->connect_fd : -1;
        arm(t, CONN_HEADERS, s->cfg.header_timeout_s);
        pthread_mutex_lock(&ct->lock);
        t->next = ct->head;
        if (ct->head)
            ct->head->prev = t;
        ct->head = t;
        pthread_mutex_unlock(&ct->lock);
        *socket_context = t;
        return;
    }
    tracked *t = *socket_context;
    if (!t)
        return;
    pthread_mutex_lock(&ct->lock);
    if (t->prev)
        t->prev->next = t->next;
    else
        ct->head = t->next;
    if (t->next)
        t->next->prev = t->prev;
    pthread_mutex_unlock(&ct->lock);
    free(t);
    *socket_context = NULL;
}

void conntrack_phase(const cs_server *s, struct MHD_Connection *conn, cs_conn_phase phase)
{
    if (!s->conntrack)
        return;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    tracked *t = ci ? ci->socket_context : NULL;
    if (!t)
        return;
    double timeout = phase == CONN_HEADERS ? s->cfg.header_timeout_s
                   : phase == CONN_BODY    ? s->cfg.body_timeout_s
                                           : 0;
    arm(t, phase, timeout);
}

static void *sweeper_main(void *arg)
{
    cs_conntrack *ct = arg;
    cs_server *s = ct->srv;
    static const char body[] = "{\"error\":{\"code\":\"timeout\",\"message\":\"the request did "
                               "not arrive in time\",\"field\":\"\"}}\n";
    char timeout_408[512];
    int n408 = snprintf(timeout_408, sizeof timeout_408,
                        "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
                        "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                        sizeof body - 1, body);
    pthread_mutex_lock(&ct->lock);
    while (!ct->stop) {
        struct timespec ts = cs_deadline_after(0.1);
        pthread_cond_timedwait(&ct->wake, &ct->lock, &ts);
        long long now = now_ms();
        for (tracked *t = ct->head; t; t = t->next) {
            int phase = atomic_load(&t->phase);
            if (t->cut || phase == CONN_BUSY || t->fd < 0 || now <= atomic_load(&t->deadline_ms))
                continue;
            t->cut = true;
            /* nothing of a response is on the wire in these phases */
            ssize_t w = send(t->fd, timeout_408, (size_t)n408,
                             MSG_DONTWAIT | MSG_NOSIGNAL);
            (void)w;
            shutdown(t->fd, SHUT_RDWR);
            atomic_fetch_add_explicit(&s->metrics.http_timeouts[phase == CONN_HEADERS ? 0 : 1],
                                      1, memory_order_relaxed);
        }
    }
    pthread_mutex_unlock(&ct->lock);
    return NULL;
}

cs_conntrack *conntrack_start(cs_server *s)
{
    cs_conntrack *ct = calloc(1, sizeof *ct);
    if (!ct)
        return NULL;
    ct->srv = s;
    pthread_mutex_init(&ct->lock, NULL);
    pthread_cond_init(&ct->wake, NULL);
    if (pthread_create(&ct->sweeper, NULL, sweeper_main, ct) != 0) {
        pthread_mutex_destroy(&ct->lock);
        pthread_cond_destroy(&ct->wake);
        free(ct);
        return NULL;
    }
    return ct;
}

void conntrack_stop(cs_conntrack *ct)
{
    if (!ct)
        return;
    pthread_mutex_lock(&ct->lock);
    ct->stop = true;
    pthread_cond_signal(&ct->wake);
    pthread_mutex_unlock(&ct->lock);
    pthread_join(ct->sweeper, NULL);
}

void conntrack_free(cs_conntrack *ct)
{
    if (!ct)
        return;
    /* MHD is stopped: it reported every connection closed */
    pthread_mutex_destroy(&ct->lock);
    pthread_cond_destroy(&ct->wake);
    free(ct);
}

/*
 * static_files.c - serves the dashboard (clients/dashboard) at /.  Paths are
 * checked lexically (a fixed character set, no dot-segments) and then by
 * realpath(), so neither "..", symlinks nor encoded tricks reach a file
 * outside the static directory.
 */
#include "server_internal.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int static_dir_resolve(const char *configured, char *out, size_t n)
{
    out[0] = '\0';
    char path[PATH_MAX];
    if (configured && *configured) {
        snprintf(path, sizeof path, "%s", configured);
    } else {
        /* the binary is <repo>/build/collsynthd: use <repo>/clients/dashboard */
        char exe[PATH_MAX];
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (len <= 0)
            return -1;
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (!slash)
            return -1;
        *slash = '\0';
        slash = strrchr(exe, '/');
        if (!slash)
            return -1;
        *slash = '\0';
        /* a build tree (<repo>/build/collsynthd), else an installed one
         * (PREFIX/bin/collsynthd with PREFIX/share/collsynth/dashboard:
         * `make install`) */
        snprintf(path, sizeof path, "%.*s/clients/dashboard", (int)(sizeof path - 40), exe);
        struct stat tree;
        if (stat(path, &tree) != 0)
            snprintf(path, sizeof path, "%.*s/share/collsynth/dashboard",
                     (int)(sizeof path - 40), exe);
    }
    char real[PATH_MAX];
    if (!realpath(path, real))
        return -1;
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
        return -1;
    snprintf(out, n, "%s", real);
    return 0;
}

static const char *content_type(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (!dot)
        return "application/octet-stream";
    static const struct { const char *ext, *type; } types[] = {
        {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"}, {".css", "text/css; charset=utf-8"},
        {".json", "application/json"}, {".svg", "image/svg+xml"}, {".png", "image/png"},
        {".ico", "image/x-icon"}, {".txt", "text/plain; charset=utf-8"},
        {".map", "application/json"}, {".woff2", "font/woff2"}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(dot, types[i].ext))
            return types[i].type;
    return "application/octet-stream";
}

static bool safe_path(const char *url)
{
    if (url[0] != '/' || strlen(url) > 200)
        return false;
    for (const char *p = url; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '/' || c == '.' || c == '-' || c == '_';
        if (!ok)
            return false;
        if (c == '/' && p[1] == '.')
            return false; /* dot-files and dot-segments */
    }
    return true;
}

static const char fallback_page[] =
    "<!doctype html><html><head><meta charset=\"utf-8\"><title>collsynthd</title></head>"
    "<body><h1>collsynthd</h1><p>The dashboard files are not installed here "
    "(--static-dir).</p><ul><li><a href=\"/v1/health\">/v1/health</a></li>"
    "<li><a href=\"/v1/topologies\">/v1/topologies</a></li>"
    "<li><a href=\"/metrics\">/metrics</a></li></ul></body></html>";

enum MHD_Result serve_static(req_state *rs, const char *url)
{
    cs_server *s = rs->srv;
    bool root = !strcmp(url, "/");
    if (!s->static_dir[0]) {
        if (root)
            return respond_text(rs, 200, fallback_page, sizeof fallback_page - 1,
                                "text/html; charset=utf-8");
        return respond_error(rs, 404, "not_found", "path", "no such file");
    }
    if (!safe_path(url))
        return respond_error(rs, 404, "not_found", "path", "no such file");
    char path[PATH_MAX + 256], real[PATH_MAX];
    snprintf(path, sizeof path, "%s%s%s", s->static_dir, url,
             url[strlen(url) - 1] == '/' ? "index.html" : "");
    if (!realpath(path, real)) {
        if (root)
            return respond_text(rs, 200, fallback_page, sizeof fallback_page - 1,
                                "text/html; charset=utf-8");
        return respond_error(rs, 404, "not_found", "path", "no such file");
    }
    size_t dl = strlen(s->static_dir);
    if (strncmp(real, s->static_dir, dl) != 0 || real[dl] != '/')
        return respond_error(rs, 404, "not_found", "path", "no such file");
    int fd = open(real, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return respond_error(rs, 404, "not_found", "path", "no such file");
    }
    struct MHD_Response *r = MHD_create_response_from_fd((size_t)st.st_size, fd);
    if (!r) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", content_type(real));
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    return queue(rs, 200, r);
}

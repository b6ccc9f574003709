# collsynth: collsynthd (HTTP daemon + dashboard) and the collsynth CLI.
#
#   docker build -t collsynth .
#   docker run -p 127.0.0.1:8470:8470 -v collsynth-data:/var/lib/collsynth \
#       -e COLLSYNTH_AUTH_TOKEN=secret collsynth
#
# Inside the container the daemon binds 0.0.0.0 (a published port needs it);
# publish it on the host's loopback, or set COLLSYNTH_AUTH_TOKEN before
# publishing it further (the daemon warns at start when it has no token).
#
# Two stages on Debian bookworm: the build stage installs exactly
# scripts/packages-build.txt, the runtime stage exactly
# scripts/packages-runtime.txt (tests/test_dockerfile.c checks both lists).

# ---- build -----------------------------------------------------------------------
FROM debian:bookworm-slim AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        gcc \
        make \
        pkg-config \
        libz3-dev \
        libjansson-dev \
        libmicrohttpd-dev \
        libsqlite3-dev \
        libpq-dev \
        libcurl4-openssl-dev \
        libzstd-dev \
        libbliss-dev \
        zlib1g-dev \
        check \
        coinor-libclp-dev \
        coinor-libcbc-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The package lists are installed above; skip the Makefile's installer step.
RUN mkdir -p build \
 && touch "build/.deps-$(cat scripts/packages-*.txt | md5sum | cut -c1-12)" \
 && make -j"$(nproc)" build/collsynth build/collsynthd

# ---- runtime ---------------------------------------------------------------------
FROM debian:bookworm-slim AS runtime
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        libz3-4 \
        libjansson4 \
        libmicrohttpd12 \
        libsqlite3-0 \
        libpq5 \
        libcurl4 \
        libzstd1 \
        libbliss2 \
        zlib1g \
        coinor-libclp1 \
        coinor-libcbc3 \
        ca-certificates \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system collsynth \
 && useradd --system --gid collsynth --home-dir /var/lib/collsynth --shell /usr/sbin/nologin collsynth \
 && mkdir -p /var/lib/collsynth /usr/share/collsynth \
 && chown collsynth:collsynth /var/lib/collsynth
COPY --from=build /src/build/collsynthd /src/build/collsynth /usr/local/bin/
COPY --from=build /src/clients/dashboard /usr/share/collsynth/dashboard
USER collsynth
WORKDIR /var/lib/collsynth
VOLUME ["/var/lib/collsynth"]
ENV COLLSYNTH_LISTEN=0.0.0.0 \
    COLLSYNTH_PORT=8470 \
    COLLSYNTH_DATA_DIR=/var/lib/collsynth \
    COLLSYNTH_STATIC_DIR=/usr/share/collsynth/dashboard \
    COLLSYNTH_SERVER=http://127.0.0.1:8470 \
    COLLSYNTH_URL_FILE=/tmp/collsynthd.url
EXPOSE 8470
# The runtime image has no curl binary (only libcurl): probe /v1/health with
# bash's /dev/tcp and expect a 200 status line.  The address is the one the
# daemon wrote to COLLSYNTH_URL_FILE once it listened (--url-file), so a
# `--port` or `--listen HOST:PORT` given to `docker run` is followed.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/bin/bash", "-c", "u=$(< \"${COLLSYNTH_URL_FILE:-/tmp/collsynthd.url}\") && hp=${u#http://} && h=${hp%:*} && h=${h#[} && h=${h%]} && exec 3<>\"/dev/tcp/$h/${hp##*:}\" && printf 'GET /v1/health HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
ENTRYPOINT ["/usr/local/bin/collsynthd"]

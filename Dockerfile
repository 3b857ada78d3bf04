# syntax=docker/dockerfile:1
# rollstat in a container (docs/operations.md, "In a container"):
#   docker build -t rollstat .
#   docker run -d --name rollstat -p 8125:8125/udp -p 8125:8125/tcp -p 9102:9102 rollstat
# The image's config is the sample config.toml with every listener on
# 0.0.0.0; mount your own at /etc/rollstat/config.toml to replace it.

# --- build: the repo's rust-version (Cargo.toml), on Debian 12 like the runtime.
FROM rust:1.85-slim-bookworm AS build
WORKDIR /src
# The commit `rollstat --version` names; .git is not sent to the build
# (.dockerignore), so pass it: --build-arg ROLLSTAT_BUILD_COMMIT=$(git rev-parse --short HEAD)
ARG ROLLSTAT_BUILD_COMMIT=""
COPY . .
# Cache mounts keep the registry and target/ between builds (BuildKit).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    ROLLSTAT_BUILD_COMMIT="$ROLLSTAT_BUILD_COMMIT" \
    cargo build --release --locked --bin rollstat \
    && install -D -m 0755 target/release/rollstat /out/usr/local/bin/rollstat
# Inside a container 127.0.0.1 is the container's own loopback, which
# `docker run -p` cannot reach: the sample config's listeners move to
# 0.0.0.0 (the grep fails the build if the sample's lines ever change), and
# the result must pass check-config.
RUN sed -e 's/^statsd_udp = "127.0.0.1:8125"$/statsd_udp = "0.0.0.0:8125"/' \
        -e 's/^statsd_tcp = "127.0.0.1:8125"$/statsd_tcp = "0.0.0.0:8125"/' \
        -e 's/^http = "127.0.0.1:9102"$/http = "0.0.0.0:9102"/' \
        config.toml > /tmp/config.toml \
    && test "$(grep -c -E '^(statsd_udp|statsd_tcp|http) = "0\.0\.0\.0:(8125|9102)"$' /tmp/config.toml)" = 3 \
    && install -D -m 0644 /tmp/config.toml /out/etc/rollstat/config.toml \
    && /out/usr/local/bin/rollstat check-config /out/etc/rollstat/config.toml

# --- run: glibc and libgcc only (rollstat links nothing else), no shell,
# no package manager; uid/gid 65532 "nonroot".
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/ /
USER 65532:65532
# statsd over UDP and TCP; HTTP (/metrics, the JSON API, /-/healthy).
EXPOSE 8125/udp 8125/tcp 9102/tcp
# No curl in this image: the binary probes itself (GET /-/healthy, 2 s).
HEALTHCHECK --interval=15s --timeout=5s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/rollstat", "probe"]
ENTRYPOINT ["/usr/local/bin/rollstat"]
CMD ["--config", "/etc/rollstat/config.toml"]

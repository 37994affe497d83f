# syntax=docker/dockerfile:1
#
# The loop-plugins image: one fully static binary at /loop-plugins, every role a subcommand
# (controller, api, trigger, gate, ...). Static because the gate's init container copies it
# into plugin containers, whose images may have no libc at all.
#
#   docker build -t loop-plugins:dev .                                  # the default target
#   docker build --target echo-plugin -t loop-plugins-echo:dev .        # the example plugin
#
# Needs BuildKit (the default builder since Docker 23) for the cache mounts, and its base images
# pulled. Where neither is there, Dockerfile.prebuilt makes the same two images from binaries
# built on the host (hack/kind/app-images.sh).

ARG RUST_VERSION=1.95
ARG BASE_IMAGE=gcr.io/distroless/static-debian13:nonroot

# The builder: Alpine's Rust targets musl, whose executables are statically linked by default.
FROM rust:${RUST_VERSION}-alpine AS build
# ring (rustls' crypto) compiles C; readelf (binutils, pulled in by gcc) checks the result.
RUN apk add --no-cache gcc musl-dev
WORKDIR /src
ENV CARGO_PROFILE_RELEASE_STRIP=symbols CARGO_PROFILE_DIST_STRIP=symbols
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist --locked --package loop-plugins --bin loop-plugins \
    && mkdir -p /out \
    && cp target/dist/loop-plugins /out/loop-plugins \
    && if readelf -d /out/loop-plugins | grep -q NEEDED; then \
         echo "loop-plugins is not statically linked" >&2; exit 1; \
       fi \
    && /out/loop-plugins --version

# The example plugin's binary, built only for the echo-plugin target.
FROM build AS build-echo
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --package echo-plugin --bin echo-plugin \
    && cp target/release/echo-plugin /out/echo-plugin \
    && mkdir -p /out/rootfs/data

# The example plugin as a Loop plugin image: /loop-plugin/plugin.json and its UI bundle,
# /data owned by its non-root USER, the dev.loop.plugin=1 label, HTTP on $LOOP_PLUGIN_PORT.
FROM ${BASE_IMAGE} AS echo-plugin
LABEL dev.loop.plugin="1" \
      org.opencontainers.image.title="echo-plugin" \
      org.opencontainers.image.description="The example Loop plugin of loop-plugins" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build-echo /out/echo-plugin /echo-plugin
COPY examples/echo-plugin/plugin.json /loop-plugin/plugin.json
COPY examples/echo-plugin/ui /loop-plugin/ui
# /data is an entry of the copied folder (not a destination COPY creates), so --chown owns it.
COPY --from=build-echo --chown=65532:65532 /out/rootfs/ /
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/echo-plugin"]

# The loop-plugins image (the default target: keep it last).
FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="loop-plugins" \
      org.opencontainers.image.description="Runs Loop-style plugins as pods on Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/loop-plugins /loop-plugins
USER 65532:65532
ENTRYPOINT ["/loop-plugins"]

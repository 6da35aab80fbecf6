# fsd's container image: the daemon as the entry point of a Debian sandbox with what its
# features use (bash and coreutils for commands, procps, git, curl, python3, and the
# squashfs/FUSE tools of the restore and mount fallbacks), /workspace, port 3000.
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
# Code contexts: python3 with IPython (rich display), Node with the typescript package
# (fetched from the npm registry as a tarball; no npm needed). PYTHON_PACKAGES adds more,
# e.g. --build-arg PYTHON_PACKAGES="python3-matplotlib python3-pandas" for plots and tables.
# EXTRA_CA_PEM: CAs trusted for this download only (a build behind an intercepting proxy;
# scripts/build-image passes the host's own); they are not left in the image.
ARG TYPESCRIPT_VERSION=5.9.3
ARG PYTHON_PACKAGES=""
ARG EXTRA_CA_PEM=""
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bash coreutils procps util-linux git curl ca-certificates python3 python3-ipython \
      nodejs squashfs-tools squashfuse fuse3 fuse-overlayfs ${PYTHON_PACKAGES} \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /workspace /var/lib/fsd /usr/local/lib/node_modules/typescript \
 && bundle=/etc/ssl/certs/ca-certificates.crt \
 && if [ -n "$EXTRA_CA_PEM" ]; then \
      bundle=/tmp/build-ca.pem; cat /etc/ssl/certs/ca-certificates.crt > "$bundle"; \
      printf '%s\n' "$EXTRA_CA_PEM" >> "$bundle"; \
    fi \
 && curl -fsSL --cacert "$bundle" \
      "https://registry.npmjs.org/typescript/-/typescript-${TYPESCRIPT_VERSION}.tgz" \
    | tar -xz --strip-components=1 -C /usr/local/lib/node_modules/typescript \
 && rm -f /tmp/build-ca.pem
WORKDIR /workspace
# Volumes, so they are not on the container's own overlay root: a restore's overlay needs
# its upper directory (under the state dir) on a filesystem that is not overlayfs.
VOLUME ["/workspace", "/var/lib/fsd"]
EXPOSE 3000
# A Worker (or a gateway) in front holds the credentials; inside, the API is open on the
# container's port, as the reference's is. FSD_TOKEN turns auth on.
ENV FSD_LISTEN=0.0.0.0:3000 \
    FSD_NODE_PATH=/usr/local/lib/node_modules \
    FSD_NO_AUTH=true \
    FSD_WORKSPACE=/workspace \
    FSD_STATE_DIR=/var/lib/fsd
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/fsd", "serve"]

# A binary built outside the image (FSD_BINARY, relative to the build context).
FROM runtime AS prebuilt
ARG FSD_BINARY=target/release/fsd
COPY ${FSD_BINARY} /usr/local/bin/fsd

# The preview gateway of deploy/kubernetes (`fsctl gateway`): the trusted side, so not on
# the sandbox's image; only CA certificates beside a prebuilt fsctl (FSCTL_BINARY).
#   scripts/build-image --gateway [FSCTL]      # → localhost/fsd-gateway:latest
FROM ${RUNTIME_IMAGE} AS gateway
ARG FSCTL_BINARY=target/release/fsctl
COPY ${FSCTL_BINARY} /usr/local/bin/fsctl
ENTRYPOINT ["/usr/local/bin/fsctl"]

# The default: fsd built in the Rust stage.
FROM runtime AS release
COPY --from=build /fsd /usr/local/bin/fsd

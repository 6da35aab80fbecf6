# The SDK's next-line reference runtime (its standalone `sandbox` binary, which
# ../shared/anchors/reference-next/setup.sh builds under /opt/sandbox-ref-next) in the stacks'
# image in fsd's place: the same Debian and tools, only the server on port 3000 differs, so
# the next object can drive both in one run (tests/benches/cloudflare.rs). Started as the
# reference's own image starts it (tini, then the server, from /container-server).
# `scripts/dev-cloudflare reference-image` builds it as localhost/reference-next-stack:latest.
FROM localhost/fsd-stack:latest
ARG REFERENCE_VERSION
COPY container-server /container-server
COPY tini /usr/bin/tini
WORKDIR /container-server
ENV SANDBOX_VERSION=${REFERENCE_VERSION} PYTHON_POOL_MIN_SIZE=0
ENTRYPOINT ["/usr/bin/tini", "--", "/container-server/sandbox"]
CMD []

# The stand-in for workerd's networking sidecar (cloudflare/proxy-everything, which cannot be
# pulled here): tests/src/bin/egress-stand-in.rs on the Debian base scripts/build-image makes.
# scripts/dev-cloudflare builds it with the binary in the context and names it in
# MINIFLARE_CONTAINER_EGRESS_IMAGE.
FROM localhost/debian:bookworm-slim
COPY egress-stand-in /usr/local/bin/egress-stand-in
ENTRYPOINT ["/usr/local/bin/egress-stand-in"]

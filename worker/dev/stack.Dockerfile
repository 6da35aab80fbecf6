# The local stacks' container (scripts/dev-cloudflare): fsd's image with the cloudflared
# stand-in (tests/src/bin/cloudflared-stand-in.rs) where cloudflared goes, since the real one
# cannot be installed on these machines; tunnels through the stacks run on it.
FROM localhost/fsd:latest
COPY cloudflared /usr/local/bin/cloudflared

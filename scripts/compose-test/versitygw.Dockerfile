# A local stand-in for the released versity/versitygw image, for
# make compose-test on a machine that reaches no image registry
# (scripts/compose-test.sh tags it with the tag compose.yaml names). It
# offers what compose.yaml uses of the real one: /bin/sh, wget for the
# health check, and versitygw on PATH, here built from its Go module at
# the same release (CGO_ENABLED=0). The build context is a directory
# holding only that binary.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends wget \
 && rm -rf /var/lib/apt/lists/*
COPY versitygw /usr/local/bin/versitygw
ENTRYPOINT ["/usr/local/bin/versitygw"]
ARG VERSION
LABEL org.opencontainers.image.title="versitygw (local stand-in built by make compose-test)" \
      org.opencontainers.image.source="https://github.com/versity/versitygw" \
      org.opencontainers.image.version="$VERSION"

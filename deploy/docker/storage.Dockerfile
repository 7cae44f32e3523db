# The storage: object storage over S3, R2 or any S3-compatible server. Stateless.
#
# The image holds one static binary, the one `make images` builds into
# bin/images/storage (CGO_ENABLED=0, -trimpath), plus CA certificates and a
# passwd entry for its non-root user; nothing else: no shell, no package
# manager. Build it from the repository root:
#
#   make images        # builds bin/images/storage, then this image if a Docker engine runs
#   docker build -f deploy/docker/storage.Dockerfile -t brain-tools/storage:latest .
#
# Built with the whole stack and run by `make compose-test` (CI). It needs
# no image but debian:bookworm-slim and no frontend image, so it builds
# offline with the classic builder or BuildKit alike.
# deploy/compose_test.go checks this file against compose.yaml and the
# service's Config (port, health check, user, binary path).

# rootfs: the few files the binary needs beside itself.
FROM debian:bookworm-slim AS rootfs
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
RUN install -d -m 0755 /rootfs/etc/ssl/certs \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nstorage:x:65532:65532:storage:/nonexistent:/sbin/nologin\n' >/rootfs/etc/passwd \
 && printf 'root:x:0:\nstorage:x:65532:\n' >/rootfs/etc/group \
 && install -d -m 1777 /rootfs/tmp

FROM scratch
COPY --from=rootfs /rootfs/etc /etc
COPY --from=rootfs /rootfs/tmp /tmp
COPY bin/images/storage /usr/local/bin/storage
USER 65532:65532
ENV ADDR=0.0.0.0:8083
EXPOSE 8083
# The binary checks itself: GET /healthz on ADDR, exit 0 on 200.
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 \
  CMD ["/usr/local/bin/storage", "-healthcheck"]
ENTRYPOINT ["/usr/local/bin/storage"]
# Which build this is (make images passes them: pkg/version, the same the
# binary's -version and its build_info metric report).
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="brain-tools/storage" \
      org.opencontainers.image.source="https://github.com/brain-tools/suite" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION"

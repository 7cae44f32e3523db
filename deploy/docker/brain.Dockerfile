# The brain: the tool host. Its SQLite state lives in /data (BRAIN_DATA_DIR), a volume.
#
# The image holds one static binary, the one `make images` builds into
# bin/images/brain (CGO_ENABLED=0, -trimpath), plus CA certificates and a
# passwd entry for its non-root user; nothing else: no shell, no package
# manager. Build it from the repository root:
#
#   make images        # builds bin/images/brain, then this image if a Docker engine runs
#   docker build -f deploy/docker/brain.Dockerfile -t brain-tools/brain:latest .
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
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nbrain:x:65532:65532:brain:/nonexistent:/sbin/nologin\n' >/rootfs/etc/passwd \
 && printf 'root:x:0:\nbrain:x:65532:\n' >/rootfs/etc/group \
 && install -d -m 1777 /rootfs/tmp \
 && install -d -o 65532 -g 65532 -m 0700 /rootfs/data

FROM scratch
COPY --from=rootfs /rootfs/etc /etc
COPY --from=rootfs /rootfs/tmp /tmp
# The state directory, owned by the service's user: a named volume mounted
# here starts as a copy of it, so the service can write to it.
COPY --from=rootfs --chown=65532:65532 /rootfs/data /data
COPY bin/images/brain /usr/local/bin/brain
USER 65532:65532
ENV BRAIN_ADDR=0.0.0.0:8080 BRAIN_DATA_DIR=/data
EXPOSE 8080
# The binary checks itself: GET /healthz on BRAIN_ADDR, exit 0 on 200.
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 \
  CMD ["/usr/local/bin/brain", "-healthcheck"]
ENTRYPOINT ["/usr/local/bin/brain"]
# The host config is mounted here (compose.yaml mounts deploy/brain.compose.json).
CMD ["-config", "/etc/brain/brain.json"]
# Which build this is (make images passes them: pkg/version, the same the
# binary's -version and its build_info metric report).
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="brain-tools/brain" \
      org.opencontainers.image.source="https://github.com/brain-tools/suite" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION"

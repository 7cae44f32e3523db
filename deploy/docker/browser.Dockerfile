# The browser: browser_open, browser_act, browser_screenshot and
# browser_pages on Debian's Chromium, every request through the SSRF guard.
#
# Unlike most images it is Debian slim, not empty: Chromium and the fonts
# it renders pages with come from Debian's packages. Besides the static
# binary `make images` builds into bin/images/browser (CGO_ENABLED=0,
# -trimpath) it carries chromium, fonts-liberation and ca-certificates
# (the certificates Chromium checks pages against).
#
#   make images        # builds bin/images/browser, then this image if a Docker engine runs
#   docker build -f deploy/docker/browser.Dockerfile -t brain-tools/browser:latest .
#
# Built with the whole stack and run by `make compose-test` (CI); its apt
# step needs the build network (make images DOCKER_BUILD_FLAGS="--network host").
#
# Chromium runs without its own sandbox (--no-sandbox, as the service always
# starts it): the container is the sandbox, with no capabilities, a
# read-only root and only /tmp writable (the profile of each start lives
# there, and Chromium's shared memory files: --disable-dev-shm-usage). Its
# network is the service's proxy only, which dials through the guard.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends chromium fonts-liberation ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && command -v chromium >/dev/null \
 && groupadd -g 65532 browser \
 && useradd -u 65532 -g 65532 -M -d /tmp -s /usr/sbin/nologin browser
COPY bin/images/browser /usr/local/bin/browser
USER 65532:65532
ENV ADDR=0.0.0.0:8086 HOME=/tmp
EXPOSE 8086
# The binary checks itself: GET /healthz on ADDR, exit 0 on 200.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["/usr/local/bin/browser", "-healthcheck"]
ENTRYPOINT ["/usr/local/bin/browser"]
# Which build this is (make images passes them: pkg/version, the same the
# binary's -version and its build_info metric report).
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="brain-tools/browser" \
      org.opencontainers.image.source="https://github.com/brain-tools/suite" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION"

# The sandbox: runs the agent's commands in a bubblewrap sandbox per
# session (SANDBOX_BACKEND=local, the default), or on E2B, Daytona or Modal.
#
# Unlike the other images it is Debian slim, not empty: a local sandbox
# sees this image's /usr, /bin, /lib and /etc read-only (SANDBOX_RO_PATHS),
# so the tools the agent can run are the ones installed here. Besides the
# static binary `make images` builds into bin/images/sandbox
# (CGO_ENABLED=0, -trimpath) it carries:
#   - bubblewrap (bwrap), and prlimit from util-linux (Essential in Debian),
#     which the local backend runs every command through;
#   - a small set of tools for the agent: bash, coreutils, grep, sed, find,
#     tar, gzip, diff, perl (all in Debian slim already), python3 and jq;
#   - ca-certificates, for the service's own calls to E2B, Daytona or Modal
#     (a local sandbox has no network).
# One stage: the binary is built outside (make images) and Debian is the
# runtime itself, so there is nothing to prepare in another stage.
#
#   make images        # builds bin/images/sandbox, then this image if a Docker engine runs
#   docker build -f deploy/docker/sandbox.Dockerfile -t brain-tools/sandbox:latest .
#
# Built with the whole stack and run by `make compose-test` (CI). It needs
# no image but debian:bookworm-slim and no frontend image, so it builds
# offline with the classic builder or BuildKit alike.
#
# What bubblewrap needs from the container. The service runs as a non-root
# user (65532), so bwrap makes an unprivileged user namespace for each
# command and, inside it, mounts a new /proc (--unshare-pid --proc /proc),
# a tmpfs root and /dev. No capability is needed (cap_drop: ALL works, and
# no-new-privileges too: bwrap here is not setuid), but three default
# confinements of a Docker container refuse those steps:
#   - seccomp: Docker's default profile refuses clone/unshare with
#     CLONE_NEWUSER to a process without CAP_SYS_ADMIN. Run with
#     seccomp=unconfined, or with a profile that is Docker's default plus
#     clone/unshare for CLONE_NEWUSER (the sandbox then adds its own
#     seccomp filter to each command);
#   - AppArmor: the docker-default profile refuses mount. Run with
#     apparmor=unconfined (or a profile that allows bwrap's mounts);
#   - masked /proc: Docker covers /proc/kcore, /proc/keys, ... and makes
#     /proc/sys read-only; the kernel then refuses a new proc mount in a
#     user namespace ("mount too revealing"). Run with
#     systempaths=unconfined (Kubernetes: securityContext.procMount:
#     Unmasked, which needs hostUsers: false and the ProcMountType feature).
# And from the host kernel: user namespaces enabled
# (user.max_user_namespaces > 0; kernel.unprivileged_userns_clone=1 on
# kernels that have it; kernel.apparmor_restrict_unprivileged_userns=0 on
# Ubuntu 23.10 and later). No --privileged. compose.yaml sets exactly these
# three security options. At start-up the service runs a probe sandbox and
# refuses to start, naming what is missing, when any of this is not so.
#
# As a non-root service every session's commands run under the service's
# own uid (SANDBOX_UID_BASE applies only as root), so SANDBOX_LIMIT_PROCS
# caps the processes of all sessions together, not of each; and it cannot
# make the per-session cgroups (SANDBOX_SESSION_MEMORY_BYTES, _PIDS, _CPUS:
# Docker mounts /sys/fs/cgroup read-only in a container that is not
# privileged). The service says so at start and in /healthz
# (session_bounds); compose.yaml bounds the container as a whole instead
# (mem_limit, pids_limit).
#
# The service is the container's PID 1: it reaps every process that ends
# up its child (a sandbox's init, which bwrap leaves to whoever reaps), so
# timed-out and cancelled commands leave no zombies; no --init is needed.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap ca-certificates jq python3 \
 && rm -rf /var/lib/apt/lists/* \
 && for t in bwrap prlimit bash python3 jq; do command -v "$t" >/dev/null || exit 1; done
# sandbox (65532) runs the service and owns the workspaces; agent (1000) is
# SANDBOX_INNER_UID, the uid commands see inside a sandbox, named so that
# `id` and `whoami` answer.
RUN groupadd -g 65532 sandbox \
 && useradd -u 65532 -g 65532 -M -d /nonexistent -s /usr/sbin/nologin sandbox \
 && groupadd -g 1000 agent \
 && useradd -u 1000 -g 1000 -M -d /workspace -s /bin/bash agent \
 && install -d -o 65532 -g 65532 -m 0711 /var/lib/brain-sandbox
COPY bin/images/sandbox /usr/local/bin/sandbox
USER 65532:65532
ENV ADDR=0.0.0.0:8082 SANDBOX_ROOT=/var/lib/brain-sandbox
EXPOSE 8082
# The binary checks itself: GET /healthz on ADDR (which repeats the
# sandbox probe at most once a minute), exit 0 on 200.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["/usr/local/bin/sandbox", "-healthcheck"]
ENTRYPOINT ["/usr/local/bin/sandbox"]
# Which build this is (make images passes them: pkg/version, the same the
# binary's -version and its build_info metric report).
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="brain-tools/sandbox" \
      org.opencontainers.image.source="https://github.com/brain-tools/suite" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION"

# The RedisCluster operator image: pyctrl + the operator in a venv, running as a non-root user.
# Build: docker build -t pyctrl/rediscluster-operator:0.1.0 .   (or `make image`: buildah, no daemon)
# BASE: any Debian-based image with python3 >= 3.11 and its venv module; `make image` passes a Debian bookworm
# root filesystem made by mmdebstrap (no registry is reachable where this project is developed).
ARG BASE=python:3.11-slim
FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY pyctrl ./pyctrl
# Only for a TLS-intercepting proxy: a CA bundle mounted into the build (`make image` passes the
# host's pip CA bundle); this stage's ARGs do not reach the final image.
ARG PIP_CERT
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir ".[redis]"

FROM ${BASE}
LABEL org.opencontainers.image.title="rediscluster-operator" \
      org.opencontainers.image.description="The pyctrl RedisCluster operator" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/venv /opt/venv
# redis-check-aof: a point-in-time restore (the restore init container runs this image) cuts the
# append-only file at the target second with it. `make image`'s base already holds it.
RUN command -v redis-check-aof >/dev/null || { apt-get update && \
    apt-get install -y --no-install-recommends redis-tools && rm -rf /var/lib/apt/lists/*; }
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /app
COPY examples/__init__.py examples/__init__.py
COPY examples/rediscluster examples/rediscluster
USER 65532:65532
ENV PYTHONUNBUFFERED=1
EXPOSE 8080 8081
ENTRYPOINT ["python", "-m", "examples.rediscluster"]

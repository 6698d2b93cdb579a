# The RedisCluster operator image: pyctrl + the operator, running as a non-root user.
# Build: docker build -t pyctrl/rediscluster-operator:0.1.0 .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY pyctrl ./pyctrl
RUN pip install --no-cache-dir --prefix=/install ".[redis]"

FROM python:3.11-slim
COPY --from=build /install /usr/local
WORKDIR /app
COPY examples/__init__.py examples/__init__.py
COPY examples/rediscluster examples/rediscluster
USER 65532:65532
ENV PYTHONUNBUFFERED=1
EXPOSE 8080 8081
ENTRYPOINT ["python", "-m", "examples.rediscluster"]

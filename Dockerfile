# One image for all five services; the command picks the role:
#   docker run IMAGE serve ingress --host 0.0.0.0 --port 8080
# Build: docker build -t agentstream .
ARG PYTHON_IMAGE=python:3.11-slim

FROM ghcr.io/astral-sh/uv:0.13 AS uv

# -- build: resolve from the lock file only, into /app/.venv -----------------------
FROM ${PYTHON_IMAGE} AS build
COPY --from=uv /uv /usr/local/bin/uv
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv
WORKDIR /src

# Dependencies first, from the manifests alone, so that a source change does not
# re-download them. Every workspace member's pyproject.toml must be listed here
# (tests/unit/docs/test_deploy_files.py checks it).
COPY pyproject.toml uv.lock ./
COPY libs/agentstream/pyproject.toml libs/agentstream/pyproject.toml
COPY libs/agentstream-testing/pyproject.toml libs/agentstream-testing/pyproject.toml
COPY services/ingress/pyproject.toml services/ingress/pyproject.toml
COPY services/agent-runner/pyproject.toml services/agent-runner/pyproject.toml
COPY services/tool-executor/pyproject.toml services/tool-executor/pyproject.toml
COPY services/delivery/pyproject.toml services/delivery/pyproject.toml
COPY services/persistence/pyproject.toml services/persistence/pyproject.toml
COPY services/stack/pyproject.toml services/stack/pyproject.toml
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-install-workspace

# Then our own packages, installed as wheels (--no-editable) so that the runtime
# image needs /app/.venv only, not the source tree. No cache here: uv keys the
# wheels it builds from local sources on pyproject.toml, so a cached build would
# ship stale code after a source-only change.
COPY libs libs
COPY services services
RUN uv sync --frozen --no-dev --no-editable --no-cache

# -- runtime ------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
RUN useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin agentstream
COPY --from=build /app/.venv /app/.venv
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    AGENTSTREAM__HTTP__HOST=0.0.0.0
WORKDIR /app
USER 10001
EXPOSE 8080
ENTRYPOINT ["agentstream"]
CMD ["--help"]

# syntax=docker/dockerfile:1
# stepscope analyzer image: the analyzer Job (trace parsing, diagnosis, report); no torch.
# Built from the repository root with the one pyproject: docker build -f images/analyzer.Dockerfile -t stepscope/analyzer:dev .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# A C compiler for the native parts (the parser's fast path stepscope_analyzer.parse._scan, the interval analyses'
# kernels stepscope_analyzer.analyses._interval_kernels); the final stage has none.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml setup.py README.md ./
COPY requirements/constraints.txt requirements/constraints.txt
COPY contract contract
COPY storage storage
COPY cli cli
COPY operator operator
COPY sidecar sidecar
COPY analyzer_job analyzer_job
COPY localcluster localcluster
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv /opt/stepscope \
 && /opt/stepscope/bin/pip install -c requirements/constraints.txt "$(ls /wheels/stepscope-*.whl)[analyzer]" \
 && /opt/stepscope/bin/python -c "import stepscope_analyzer.parse._scan, stepscope_analyzer.analyses._interval_kernels" \
 && rm -rf /opt/stepscope/lib/python3.11/site-packages/pip /opt/stepscope/bin/pip*

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="stepscope-analyzer" \
      org.opencontainers.image.description="stepscope analyzer" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/stepscope/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/stepscope /opt/stepscope
# Bytecode ships in the image: the root filesystem may be read-only and PYTHONDONTWRITEBYTECODE is set, so a module
# without it is compiled again by every process of every Job (the command and the rank workers' fork server each
# import the analyzer, numpy and pydantic). pip wrote it for the packages above (COPY keeps the sources' times,
# which it is checked against); the interpreter's own library is compiled here, best effort: a module left out is
# compiled where it is imported, as without this line.
RUN python -m compileall -q -j 0 -x '/(test|tests|idle_test)/' "$(python -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')" || true
# Non-root, matching the chart's securityContext (runAsUser 65532); the root filesystem may be read-only.
USER 65532:65532
CMD ["stepscope", "--help"]

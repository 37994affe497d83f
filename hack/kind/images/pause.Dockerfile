# The Pod sandbox: Kubernetes' pause.c, statically linked, as its own image runs it.
FROM scratch
COPY pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]

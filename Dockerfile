# syntax=docker/dockerfile:1
#
# Breakwater: a static binary on a distroless base, running as non-root.
#
#   docker build -t breakwater:local .
#
# On environment variables alone (no config file):
#   docker run --rm -p 127.0.0.1:8080:8080 \
#     -e BREAKWATER_UPSTREAM_URL=https://api.openai.com/v1 breakwater:local
# With a config file (examples/ holds minimal ones):
#   docker run --rm -p 127.0.0.1:8080:8080 -e OPENAI_API_KEY \
#     -v "$PWD/examples/openai.toml:/etc/breakwater/config.toml:ro" \
#     breakwater:local -config /etc/breakwater/config.toml
#
# The image listens on 0.0.0.0:8080 (BREAKWATER_SERVER_LISTEN below): the
# loopback default is unreachable through -p. The variable beats a mounted
# file's server.listen; set it (-e) to listen elsewhere.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w" -o /out/breakwater .

# A tiny HTTP probe for `docker compose` healthchecks: distroless has no shell,
# curl or wget. Kubernetes probes use httpGet and do not need it.
COPY <<'EOF_PROBE' /probe/main.go
// Command healthcheck exits 0 when GET <url> answers 2xx within 2s.
package main

import (
	"net/http"
	"os"
	"time"
)

func main() {
	url := "http://127.0.0.1:8080/healthz"
	if len(os.Args) > 1 {
		url = os.Args[1]
	}
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		os.Stderr.WriteString(resp.Status + "\n")
		os.Exit(1)
	}
}
EOF_PROBE
RUN --mount=type=cache,target=/root/.cache/go-build \
    cd /probe && CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w" -o /out/healthcheck main.go \
    && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/breakwater /breakwater
COPY --from=build /out/healthcheck /healthcheck
# Working directory = data directory: the default cache.data_dir "./data"
# lands here, writable by the non-root user. Mount a volume (compose) or an
# emptyDir (Kubernetes, read-only root filesystem) on it.
COPY --from=build --chown=65532:65532 /out/data /var/lib/breakwater
WORKDIR /var/lib/breakwater
USER 65532:65532
ENV BREAKWATER_SERVER_LISTEN=0.0.0.0:8080
EXPOSE 8080
# No CMD: without arguments Breakwater serves on its defaults and BREAKWATER_*
# variables; pass "-config FILE" (compose, the Kubernetes sidecar) for a file.
ENTRYPOINT ["/breakwater"]

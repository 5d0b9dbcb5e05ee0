# syntax=docker/dockerfile:1
#
# Breakwater: a static binary on a distroless base, running as non-root.
#
#   docker build -t breakwater .
#   docker run --rm -p 127.0.0.1:8080:8080 \
#     -v "$PWD/config.toml:/etc/breakwater/config.toml:ro" breakwater
#
# The config must listen on 0.0.0.0:8080 (or ":8080") inside a container; the
# loopback default of config.example.toml is unreachable through -p.

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
EXPOSE 8080
ENTRYPOINT ["/breakwater"]
CMD ["-config", "/etc/breakwater/config.toml"]

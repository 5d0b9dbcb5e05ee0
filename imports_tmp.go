//go:build tools

package tools

import (
	_ "github.com/dgraph-io/ristretto/v2"
	_ "github.com/labstack/echo/v4"
	_ "github.com/labstack/echo/v4/middleware"
	_ "github.com/pelletier/go-toml/v2"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "github.com/qdrant/go-client/qdrant"
	_ "github.com/sashabaranov/go-openai"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/sync/singleflight"
	_ "golang.org/x/text/unicode/norm"
	_ "gonum.org/v1/gonum/blas/blas32"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/test/bufconn"
)

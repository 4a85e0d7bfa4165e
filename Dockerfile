# syntax=docker/dockerfile:1

# ---- build -------------------------------------------------------------------
FROM golang:1.26 AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
# The version `sluice version` and /healthz report: docker build --build-arg VERSION=v1.2.3
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags="-s -w -X github.com/sluice-dev/sluice/internal/sluice.Version=${VERSION}" \
      -o /out/ ./cmd/sluice ./cmd/sluice-healthcheck

# ---- runtime -------------------------------------------------------------------
# distroless/static: CA certificates and tzdata, no shell, runs as uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
# sluice-healthcheck GETs /healthz: the health check (docker-compose.yml),
# as the image has no shell or curl. No HEALTHCHECK here, as the address
# depends on the role: an API process answers on SLUICE_ADDR (8080), any
# other (serve --worker) on SLUICE_HEALTH_ADDR (8081).
COPY --from=build /out/sluice /out/sluice-healthcheck /usr/local/bin/
ENV SLUICE_ADDR=0.0.0.0:8080 SLUICE_HEALTH_ADDR=0.0.0.0:8081
USER nonroot:nonroot
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["serve"]

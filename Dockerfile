# Image of the controller binary:
#   docker build --build-arg VERSION=$(git describe --tags --always) -t REGISTRY/runtime-extractor-controller:TAG .
# (podman and buildah read it too). The Deployment in manifests/ runs it. VERSION is
# what --version and runtime_extractor_build_info report, as with `make build`.

FROM docker.io/library/golang:1.26 AS builder
WORKDIR /src
# Dependencies first, so a source change does not download modules again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
# Static binary: the runtime image has no C library.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w ${VERSION:+-X main.version=${VERSION}}" \
      -o /out/runtime-extractor-controller ./cmd/runtime-extractor-controller

# Distroless static: CA certificates and tzdata, no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=builder /out/runtime-extractor-controller /usr/bin/runtime-extractor-controller
# Numeric, so the kubelet can verify runAsNonRoot; OpenShift's restricted SCC
# replaces it with a UID from the namespace's range.
USER 65532:65532
ENTRYPOINT ["/usr/bin/runtime-extractor-controller"]

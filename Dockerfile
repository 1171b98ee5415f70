# Image of the controller binary:
#   docker build --build-arg VERSION=$(git describe --tags --always) -t REGISTRY/runtime-extractor-controller:TAG .
# (podman and buildah read it too). The Deployment in manifests/ runs it. VERSION is
# what --version and runtime_extractor_build_info report, as with `make build`.
#
# Base images: RHEL 9 like the Insights Operator's image (OpenShift CI's RHEL 9
# Go builder and base), taken from the public UBI 9 repositories because
# OpenShift CI's registry needs a login. Both are pinned by digest, so a moved
# tag cannot change a build. The digests are copied from the Dockerfile of
# github.com/konflux-ci/mintmaker at commit 35cc907 (go-toolset:1.25 and
# ubi-minimal:latest as they were then); no `make` target pulls these images,
# so nothing here verifies them. To move one, take the digest the registry
# reports (skopeo inspect docker://IMAGE:TAG); go-toolset's Go must satisfy
# go.mod's go directive.

FROM registry.access.redhat.com/ubi9/go-toolset:1.25@sha256:6983c6e7023236d1b5093c75c94402c7bdfd43c36ed9c34f2feda72a0ea7c8b1 AS builder
# go-toolset runs as UID 1001; this stage is thrown away, so build as root
# rather than chown the sources.
USER 0
WORKDIR /src
# Dependencies first, so a source change does not download modules again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
# Static binary: it needs no C library from the runtime image.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w ${VERSION:+-X main.version=${VERSION}}" \
      -o /out/runtime-extractor-controller ./cmd/runtime-extractor-controller

# UBI 9 minimal: CA certificates and tzdata, microdnf, no compiler.
FROM registry.access.redhat.com/ubi9/ubi-minimal@sha256:c7d44146f826037f6873d99da479299b889473492d3c1ab8af86f08af04ec8a0
COPY --from=builder /out/runtime-extractor-controller /usr/bin/runtime-extractor-controller
# Numeric, so the kubelet can verify runAsNonRoot; OpenShift's restricted-v2 SCC
# replaces it with a UID from the namespace's range.
USER 65532:65532
ENTRYPOINT ["/usr/bin/runtime-extractor-controller"]

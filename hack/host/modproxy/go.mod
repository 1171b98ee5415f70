// A module of its own, so that golang.org/x/mod stays out of the library's
// requirements (and out of a host's module graph).
module github.com/insights-runtime-extractor/controller/hack/host/modproxy

go 1.25.0

require golang.org/x/mod v0.29.0

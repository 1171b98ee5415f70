package main

import (
	"regexp"
	"runtime"
	"runtime/debug"

	kversion "k8s.io/apimachinery/pkg/version"

	"github.com/insights-runtime-extractor/controller/pkg/metrics"
)

// version is the binary's version, stamped at build time:
//
//	go build -ldflags "-X main.version=$(git describe --tags --always --dirty)"
//
// (make build does so). Empty means unstamped: binaryVersion falls back to the
// module version the Go toolchain recorded.
var version string

// readBuildInfo is debug.ReadBuildInfo; tests replace it.
var readBuildInfo = debug.ReadBuildInfo

// binaryVersion is the version the binary reports (--version, build_info):
// the -X stamp, else the main module's version (set by go install module@version,
// and from VCS tags when the toolchain stamps them), else metrics.DevVersion, the
// honest answer for a "(devel)" build.
func binaryVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := readBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return metrics.DevVersion
}

var majorMinor = regexp.MustCompile(`^v?(\d+)\.(\d+)`)

// versionInfo is what controllercmd logs at start and exports as
// <namespace>_build_info: the version, the VCS revision and state when the
// toolchain recorded them, and the Go toolchain and platform.
func versionInfo(v string) kversion.Info {
	info := kversion.Info{
		GitVersion: v,
		GoVersion:  runtime.Version(),
		Compiler:   runtime.Compiler,
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
	if m := majorMinor.FindStringSubmatch(v); m != nil {
		info.Major, info.Minor = m[1], m[2]
	}
	if bi, ok := readBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.GitCommit = s.Value
			case "vcs.modified":
				info.GitTreeState = map[string]string{"true": "dirty", "false": "clean"}[s.Value]
			}
		}
	}
	return info
}

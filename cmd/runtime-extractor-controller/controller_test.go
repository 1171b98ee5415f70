package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	kversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/insights-runtime-extractor/controller/pkg/metrics"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// TestMetricsServedBeforeLeaderElection: controllercmd starts /metrics, which
// serves the legacy registry, before it campaigns for the Lease, and calls run
// only once this replica leads. The runtime_extractor_ series must already be
// in that registry when controllercmd takes over (its Run), so a standby serves
// them too.
func TestMetricsServedBeforeLeaderElection(t *testing.T) {
	setVersion(t, "v7.8.9-test")
	t.Cleanup(func() {
		// The legacy registry is process-wide: unregister (by their descriptors)
		// what the command registered, so the test can run again (-count).
		for _, c := range append(metrics.New().Collectors(), metrics.NewBuildInfo("v7.8.9-test")) {
			legacyregistry.Registerer().Unregister(c)
		}
	})
	cmd := newRootCommand(context.Background())
	var served map[string]int
	var buildLabels map[string]string
	cmd.Run = func(*cobra.Command, []string) { // in place of controllercmd: no server, no Lease, no run
		families, err := legacyregistry.DefaultGatherer.Gather()
		if err != nil {
			t.Errorf("gather: %v", err)
		}
		served = map[string]int{}
		for _, f := range families {
			if strings.HasPrefix(f.GetName(), "runtime_extractor_") {
				served[f.GetName()] = len(f.GetMetric())
			}
			if f.GetName() == "runtime_extractor_build_info" && len(f.GetMetric()) == 1 {
				buildLabels = map[string]string{}
				for _, l := range f.GetMetric()[0].GetLabel() {
					buildLabels[l.GetName()] = l.GetValue()
				}
			}
		}
	}
	cmd.SetArgs([]string{"--kubeconfig", "/nonexistent"})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("execute: %v\n%s", err, out.String())
	}
	if served == nil {
		t.Fatal("the command never reached controllercmd")
	}
	for name, series := range map[string]int{
		"runtime_extractor_state":                             7, // one per state and Holding, all 0 until run sets one
		"runtime_extractor_drift_events_total":                3,
		"runtime_extractor_actions_total":                     4,
		"runtime_extractor_retry_backoff_seconds":             1,
		"runtime_extractor_last_transition_timestamp_seconds": 1,
		"runtime_extractor_build_info":                        1,
	} {
		if served[name] != series {
			t.Errorf("before leader election the legacy registry has %d %s series, want %d (all served: %v)", served[name], name, series, served)
		}
	}
	if buildLabels["version"] != "v7.8.9-test" || buildLabels["go_version"] != runtime.Version() {
		t.Errorf("runtime_extractor_build_info labels %v, want the binary's version v7.8.9-test and Go %s", buildLabels, runtime.Version())
	}
}

// setVersion stamps the binary's version for one test, as -ldflags -X does.
func setVersion(t *testing.T, v string) {
	saved := version
	t.Cleanup(func() { version = saved })
	version = v
}

// TestSecondRegistrationFailsTheCommand: the collectors' names are taken in the
// registry (by an earlier command); the command returns the error instead of
// panicking, and does not start the controller.
func TestSecondRegistrationFailsTheCommand(t *testing.T) {
	saved := serviceAccountNamespaceFile
	t.Cleanup(func() { serviceAccountNamespaceFile = saved })
	serviceAccountNamespaceFile = filepath.Join(t.TempDir(), "absent")
	reg := prometheus.NewRegistry()
	for i, wantErr := range []bool{false, true} {
		cmd := newControllerCommand(context.Background(), reg)
		started := false
		cmd.Run = func(*cobra.Command, []string) { started = true }
		cmd.SetArgs(nil)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("command %d panicked: %v", i+1, p)
				}
			}()
			err = cmd.Execute()
		}()
		if (err != nil) != wantErr || started == wantErr {
			t.Errorf("command %d: error %v, controller started %v; want an error: %v", i+1, err, started, wantErr)
		}
	}
}

// TestBinaryVersion: the -X stamp wins, then the module version the toolchain
// recorded; a "(devel)" build says v0.0.0-dev rather than inventing a release.
func TestBinaryVersion(t *testing.T) {
	saved := readBuildInfo
	t.Cleanup(func() { readBuildInfo = saved })
	for _, tc := range []struct {
		name, stamp, module string
		noBuildInfo         bool
		want                string
	}{
		{name: "stamped", stamp: "v1.5.0-3-gabcdef0-dirty", module: "v1.4.0", want: "v1.5.0-3-gabcdef0-dirty"},
		{name: "go install module@version", module: "v1.4.0", want: "v1.4.0"},
		{name: "work tree build", module: "(devel)", want: "v0.0.0-dev"},
		{name: "no module version", want: "v0.0.0-dev"},
		{name: "no build info", noBuildInfo: true, want: "v0.0.0-dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setVersion(t, tc.stamp)
			readBuildInfo = func() (*debug.BuildInfo, bool) {
				if tc.noBuildInfo {
					return nil, false
				}
				return &debug.BuildInfo{Main: debug.Module{Path: "github.com/insights-runtime-extractor/controller", Version: tc.module}}, true
			}
			if got := binaryVersion(); got != tc.want {
				t.Errorf("binaryVersion() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestVersionInfo(t *testing.T) {
	saved := readBuildInfo
	t.Cleanup(func() { readBuildInfo = saved })
	readBuildInfo = func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}}, true
	}
	got := versionInfo("v1.12.3-2-g0123abc")
	want := kversion.Info{Major: "1", Minor: "12", GitVersion: "v1.12.3-2-g0123abc", GitCommit: "0123abcd", GitTreeState: "dirty",
		GoVersion: runtime.Version(), Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if got != want {
		t.Errorf("versionInfo = %+v, want %+v", got, want)
	}
	if got := versionInfo("0123abc"); got.Major != "" || got.Minor != "" || got.GitVersion != "0123abc" {
		t.Errorf("versionInfo of a bare commit (git describe --always without tags) = %+v, want no major or minor", got)
	}
}

// TestVersionFlag: --version prints the version and exits 0, at once, with no
// kubeconfig and no in-cluster configuration to fall back on. The command runs
// in a child process (this test binary, re-executed), because a controller
// start without a cluster ends in klog.Fatal.
func TestVersionFlag(t *testing.T) {
	if os.Getenv("RUNTIME_EXTRACTOR_VERSION_CHILD") == "1" {
		version = "v1.2.3-test"
		cmd := newRootCommand(context.Background())
		cmd.SetArgs([]string{"--version"})
		if err := cmd.Execute(); err != nil {
			os.Exit(3)
		}
		os.Exit(0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestVersionFlag$")
	child.Env = []string{"RUNTIME_EXTRACTOR_VERSION_CHILD=1", "HOME=" + t.TempDir()} // no KUBECONFIG, no KUBERNETES_SERVICE_HOST
	var stdout, stderr bytes.Buffer
	child.Stdout, child.Stderr = &stdout, &stderr
	err := child.Run()
	if ctx.Err() != nil {
		t.Fatalf("--version did not exit within a minute; stderr:\n%s", stderr.String())
	}
	if err != nil {
		t.Fatalf("--version: %v; stdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if got, want := stdout.String(), "runtime-extractor-controller v1.2.3-test\n"; got != want {
		t.Errorf("--version printed %q, want %q (stderr: %s)", got, want, stderr.String())
	}
}

// TestNamespaceFlag: in a pod the namespace is the service account's, outside
// one it is openshift-insights, and an explicit --namespace wins over both.
func TestNamespaceFlag(t *testing.T) {
	dir := t.TempDir()
	inPod := filepath.Join(dir, "namespace")
	if err := os.WriteFile(inPod, []byte("pod-namespace"), 0o644); err != nil {
		t.Fatal(err)
	}
	blank := filepath.Join(dir, "blank")
	if err := os.WriteFile(blank, []byte(" \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := serviceAccountNamespaceFile
	t.Cleanup(func() { serviceAccountNamespaceFile = saved })
	for _, tc := range []struct {
		name, file string
		args       []string
		want       string
	}{
		{"in a pod", inPod, nil, "pod-namespace"},
		{"outside a pod", filepath.Join(dir, "absent"), nil, resources.Namespace},
		{"blank service account namespace", blank, nil, resources.Namespace},
		{"explicit in a pod", inPod, []string{"--namespace", "chosen"}, "chosen"},
		{"explicit outside a pod", filepath.Join(dir, "absent"), []string{"--namespace", "chosen"}, "chosen"},
		{"explicitly empty", inPod, []string{"--namespace", ""}, "pod-namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serviceAccountNamespaceFile = tc.file
			cmd := newControllerCommand(context.Background(), prometheus.NewRegistry())
			got := "(controllercmd not reached)"
			cmd.Run = func(c *cobra.Command, _ []string) { got = c.Flags().Lookup("namespace").Value.String() }
			cmd.SetArgs(tc.args)
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			if err := cmd.Execute(); err != nil {
				t.Fatalf("execute: %v\n%s", err, out.String())
			}
			if got != tc.want {
				t.Errorf("controllercmd gets --namespace %q, want %q", got, tc.want)
			}
		})
	}
}

// TestLdflagsStampTheVersion builds the binary the way make build does, with
// -ldflags -X main.version=..., and runs --version on it. It links a full
// binary, so -short skips it.
func TestLdflagsStampTheVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("links the binary")
	}
	const stamp = "-X main.version="
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(makefile), stamp) {
		t.Fatalf("the Makefile does not stamp the version with %q", stamp)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), componentName)
	build := exec.Command(goTool, "build", "-ldflags", stamp+"v9.8.7-stamped", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, bin, "--version")
	run.Env = []string{"HOME=" + t.TempDir()} // no kubeconfig, no in-cluster configuration
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", componentName, err, out)
	}
	if got, want := string(out), componentName+" v9.8.7-stamped\n"; got != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}
}

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

var (
	cluster    *testcluster.Cluster
	binary     string // the controller binary built for this run
	skipReason string
)

// TestMain starts one local cluster for the package (each test starts its own
// controller processes and cleans up after itself) and builds the binary.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv(testcluster.SkipEnv) == "1" {
		skipReason = "end-to-end tests skipped: " + testcluster.SkipEnv + "=1"
		return m.Run()
	}
	if err := testcluster.CheckBinaries(""); err != nil {
		fmt.Fprintf(os.Stderr, "%v; or set %s=1 to skip the end-to-end tests\n", err, testcluster.SkipEnv)
		return 1
	}
	dir, err := os.MkdirTemp("", "rec-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)

	binary = filepath.Join(dir, "runtime-extractor-controller")
	build := exec.Command("go", "build", "-o", binary, "github.com/insights-runtime-extractor/controller/cmd/runtime-extractor-controller")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "build controller: %v\n", err)
		return 1
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The audit log lets a test count the requests of one client (requests_test.go).
	cluster, err = testcluster.Start(ctx, testcluster.Options{Dir: filepath.Join(dir, "cluster"), Log: os.Stdout, AuditLog: true})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start local cluster: %v\n", err)
		return 1
	}
	fmt.Printf("local cluster started in %s\n", cluster.StartupDuration)
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "local cluster logs:\n%s\n", cluster.TailLogs(30))
	}
	if err := cluster.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop local cluster: %v\n", err)
		return 1
	}
	return code
}

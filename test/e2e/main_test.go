package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// clustersEnv sets how many local clusters the suite runs on (default 2).
// Each test holds one cluster for its whole run, alone, so tests run that
// many at a time (go test's -parallel must be at least as large to use them).
const clustersEnv = "E2E_CLUSTERS"

var (
	binary     string // the controller binary built for this run
	skipReason string
	// pool holds the clusters no test holds; all lists them for TestMain.
	pool chan *testcluster.Cluster
	all  []*testcluster.Cluster
	// held maps a top-level test's name to the cluster it holds, so that its
	// subtests run on the same cluster.
	held sync.Map
)

// TestMain starts the local clusters for the package (each test holds one,
// starts its own controller processes and cleans up after itself) and builds
// the binary.
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
	n := 2
	if v := os.Getenv(clustersEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "%s=%q: want a positive number\n", clustersEnv, v)
			return 1
		}
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

	if err := startClusters(dir, n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		stopClusters()
		return 1
	}
	code := m.Run()
	if code != 0 {
		for i, c := range all {
			fmt.Fprintf(os.Stderr, "local cluster %d logs:\n%s\n", i, c.TailLogs(30))
		}
	}
	if !stopClusters() {
		return 1
	}
	return code
}

// startClusters starts n clusters side by side into the pool.
func startClusters(dir string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pool = make(chan *testcluster.Cluster, n)
	errs := make([]error, n)
	started := make([]*testcluster.Cluster, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// The audit log lets a test count the requests of one client (requests_test.go).
			started[i], errs[i] = testcluster.Start(ctx, testcluster.Options{Dir: filepath.Join(dir, fmt.Sprintf("cluster-%d", i)), Log: os.Stdout, AuditLog: true})
		})
	}
	wg.Wait()
	for i, c := range started {
		if c != nil {
			all = append(all, c)
			pool <- c
			fmt.Printf("local cluster %d started in %s\n", i, c.StartupDuration)
		}
	}
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("start local cluster %d: %w", i, err)
		}
	}
	return nil
}

func stopClusters() bool {
	ok := true
	for i, c := range all {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop local cluster %d: %v\n", i, err)
			ok = false
		}
	}
	return ok
}

// holdCluster gives the test a cluster of its own until it ends. A top-level
// test runs in parallel with the others and waits for a free cluster; a
// subtest uses the one its top-level test holds.
func holdCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	return hold(t, true)
}

// holdClusterAlone is holdCluster for a test that changes what this process
// shares (its environment, klog's output: t.Setenv, captureKlog). It does not
// run in parallel: go test runs such tests one by one, before the parallel
// ones.
func holdClusterAlone(t *testing.T) *testcluster.Cluster {
	t.Helper()
	return hold(t, false)
}

func hold(t *testing.T, parallel bool) *testcluster.Cluster {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	top, _, sub := strings.Cut(t.Name(), "/")
	if c, ok := held.Load(top); ok {
		return c.(*testcluster.Cluster)
	}
	if sub {
		t.Fatalf("%s: hold the cluster in the top-level test, so its subtests share it", t.Name())
	}
	if parallel {
		t.Parallel()
	}
	c := <-pool
	held.Store(top, c)
	// The first cleanup registered runs last: every other cleanup of the
	// test (controllers stopped, the API server restarted) still has it.
	t.Cleanup(func() {
		held.Delete(top)
		pool <- c
	})
	return c
}

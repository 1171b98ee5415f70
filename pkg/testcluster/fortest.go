package testcluster

import (
	"context"
	"os"
	"testing"
	"time"
)

// SkipEnv is the opt-out: E2E_SKIP=1 skips every test that needs the local
// cluster, with the reason logged. Without it, missing binaries fail the test.
const SkipEnv = "E2E_SKIP"

// startTimeout bounds a cold-cache start on a busy two-core machine.
const startTimeout = 3 * time.Minute

// ForTest starts a cluster for t and stops it in t.Cleanup, also when t fails.
// When the tool binaries are missing it fails, telling to run `make tools`. With
// E2E_SKIP=1 it skips instead, saying why. Dir defaults to a t.TempDir and Log to
// t.Output(); on failure the components' logs are tailed into the test output.
func ForTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if os.Getenv(SkipEnv) == "1" {
		reason := "local cluster tests skipped: " + SkipEnv + "=1"
		if err := CheckBinaries(opts.BinDir); err != nil {
			reason += " (" + err.Error() + ")"
		}
		t.Skip(reason)
	}
	if err := CheckBinaries(opts.BinDir); err != nil {
		t.Fatalf("%v; or set %s=1 to skip the local cluster tests", err, SkipEnv)
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir() // removed after the Cleanup below has stopped everything
	}
	if opts.Log == nil {
		opts.Log = t.Output()
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("local cluster logs (%s):\n%s", c.Dir, c.TailLogs(40))
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop local cluster: %v", err)
		}
	})
	return c
}

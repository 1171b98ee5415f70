package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	leaderelectionconverter "github.com/openshift/library-go/pkg/config/leaderelection"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/insights-runtime-extractor/controller/internal/testwait"
)

// lockIdentity is the Lease holder identity library-go's controllercmd gives
// a process that passes identity to WithInstanceIdentity.
func lockIdentity(t *testing.T, identity string) string {
	t.Helper()
	le := configv1.LeaderElection{Namespace: "openshift-insights", Name: componentName + "-lock"}
	// Nothing is sent: the client only records Events, and none is recorded.
	cfg, err := leaderelectionconverter.ToLeaderElectionWithLease(&rest.Config{Host: "https://127.0.0.1:1"}, le, componentName, identity)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Lock.Identity()
}

// TestLeaseIdentity: in a pod the identity is the pod's name, the same for
// every process (container) the pod runs, so a restarted container holds its
// predecessor's Lease. Without POD_NAME every process gets its own identity.
func TestLeaseIdentity(t *testing.T) {
	env := func(podName string) func(string) string {
		return func(k string) string {
			if k == podNameEnv {
				return podName
			}
			return ""
		}
	}
	const pod = "runtime-extractor-controller-5d9c7-abcde"
	if first, second := lockIdentity(t, leaseIdentity(env(pod))), lockIdentity(t, leaseIdentity(env(pod+"\n"))); first != pod || second != pod {
		t.Errorf("with POD_NAME=%s the identities are %q and %q, want the pod's name both times", pod, first, second)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Skipf("no hostname: %v", err)
	}
	for _, unset := range []string{"", "  "} {
		first, second := lockIdentity(t, leaseIdentity(env(unset))), lockIdentity(t, leaseIdentity(env(unset)))
		if first == second || !strings.HasPrefix(first, host+"_") || !strings.HasPrefix(second, host+"_") {
			t.Errorf("with POD_NAME=%q two processes get %q and %q, want two distinct identities on host %s", unset, first, second, host)
		}
	}
}

// TestLeaderElectFlagsSetOnlyWhenGiven: without a --leader-elect-* flag the
// three timings are zero, which controllercmd takes as "not chosen" and
// replaces by the values of the control-plane topology; a flag given sets its
// value, which controllercmd then keeps.
func TestLeaderElectFlagsSetOnlyWhenGiven(t *testing.T) {
	names := []string{"leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period"}
	for _, tc := range []struct {
		args []string
		want []time.Duration
	}{
		{nil, []time.Duration{0, 0, 0}},
		{[]string{"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s"},
			[]time.Duration{15 * time.Second, 10 * time.Second, 2 * time.Second}},
		{[]string{"--leader-elect-lease-duration=5m"}, []time.Duration{5 * time.Minute, 0, 0}},
	} {
		cmd := newControllerCommand(context.Background(), prometheus.NewRegistry())
		var got []time.Duration
		cmd.PreRunE = nil
		cmd.Run = func(cmd *cobra.Command, _ []string) {
			for _, n := range names {
				d, err := cmd.Flags().GetDuration(n)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, d)
			}
		}
		cmd.SetArgs(tc.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		for i, n := range names {
			if got[i] != tc.want[i] {
				t.Errorf("%v: --%s = %s, want %s", tc.args, n, got[i], tc.want[i])
			}
		}
	}
}

// TestTerminateOnFiles: a change to a file named by --terminate-on-files
// cancels the controller's context (the process then exits); nothing does
// before.
func TestTerminateOnFiles(t *testing.T) {
	saved := fileCheckInterval
	t.Cleanup(func() { fileCheckInterval = saved })
	fileCheckInterval = 50 * time.Millisecond
	file := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(file, []byte("before"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newControllerCommand(context.Background(), prometheus.NewRegistry())
	if err := cmd.ParseFlags([]string{"--terminate-on-files", file}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelled := make(chan struct{})
	var once sync.Once // the observer may see the write in two steps
	if err := terminateOnFiles(ctx, cmd.Flags(), func() { once.Do(func() { close(cancelled) }) }); err != nil {
		t.Fatal(err)
	}
	// Several observer passes over the unchanged file.
	select {
	case <-cancelled:
		t.Fatal("cancelled before the file changed")
	case <-time.After(20 * fileCheckInterval):
	}
	if err := os.WriteFile(file, []byte("after"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cancelled:
	case <-time.After(testwait.Patience):
		t.Fatal("the change of the file did not cancel the context")
	}
}

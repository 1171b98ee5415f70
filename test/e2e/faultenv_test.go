package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// Helpers of the fault and least-privilege tests.

// alive reports whether the controller process is still running: it has not
// been reaped, and the kernel still knows its PID.
func (c *controller) alive() bool {
	exited := false
	select {
	case <-c.Done():
		exited = true
	default:
	}
	return !exited && syscall.Kill(c.PID(), 0) == nil
}

func (c *controller) pid() int { return c.PID() }

// pause stops the process (SIGSTOP) without killing it: the kernel keeps
// buffering what the API server sends it, so it reads that when resumed.
func (c *controller) pause() {
	c.t.Helper()
	if err := syscall.Kill(c.pid(), syscall.SIGSTOP); err != nil {
		c.t.Fatalf("pause controller %d: %v", c.pid(), err)
	}
	// Never leave a stopped process behind: SIGTERM does not reach it.
	c.t.Cleanup(c.resume)
	// kill returns once the signal is queued; each thread stops as the kernel
	// next schedules it. Under load a thread ran on for milliseconds and
	// repaired a deletion the test made "while paused" (one CI run).
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return c.stopped(), nil
	})
	if err != nil {
		c.t.Fatalf("controller %d not stopped 10 s after SIGSTOP", c.pid())
	}
}

// stopped reports whether every thread of the process is stopped (state T in /proc).
func (c *controller) stopped() bool {
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", c.pid()))
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		// The state follows the command name in parentheses, which may hold spaces.
		if i := strings.LastIndexByte(string(b), ')'); i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return len(stats) > 0
}

// resume continues a paused process (SIGCONT); harmless when it runs.
func (c *controller) resume() { _ = syscall.Kill(c.pid(), syscall.SIGCONT) }

// logCount counts the log lines that contain s.
func (c *controller) logCount(s string) int {
	f, err := os.Open(c.Log)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			n++
		}
	}
	return n
}

// readFile returns the file's content, "" when it cannot be read.
func readFile(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(raw)
}

// logContainsFold reports whether the log contains s, ignoring case.
func (c *controller) logContainsFold(s string) bool {
	raw, err := os.ReadFile(c.Log)
	return err == nil && strings.Contains(strings.ToLower(string(raw)), strings.ToLower(s))
}

// waitLog waits until the controller's log contains s.
func (c *controller) waitLog(s string, timeout time.Duration) {
	c.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return c.logContains(s), nil
	})
	if err != nil {
		c.t.Fatalf("controller %d did not log %q within %s:\n%s", c.pid(), s, timeout, tail(c.Log, 30))
	}
}

// metricSum adds up the samples of the metric family name in a /metrics body
// whose labels include every one of labels, each written as in PromQL
// (`action="Apply"`). The body is parsed with expfmt (testcluster.Metrics).
func metricSum(body, name string, labels ...string) float64 {
	m, err := testcluster.ParseMetrics(body)
	if err != nil {
		panic(err) // bodies come from c.metrics(), which parsed them already
	}
	var pairs []string
	for _, l := range labels {
		k, quoted, ok := strings.Cut(l, "=")
		v, err := strconv.Unquote(quoted)
		if !ok || err != nil {
			panic(fmt.Sprintf("metricSum: label matcher %q is not name=\"value\"", l))
		}
		pairs = append(pairs, k, v)
	}
	return m.Sum(name, pairs...)
}

// stopAPIServer stops kube-apiserver of the test's cluster. Whatever happens
// next, the test's cleanup starts it again, so later tests find it healthy.
func (e *env) stopAPIServer() time.Time {
	e.t.Helper()
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// "already running" is the normal case: the test restarted it itself.
		if err := e.cluster.StartAPIServer(ctx); err != nil && !strings.Contains(err.Error(), "already running") {
			e.t.Errorf("restart kube-apiserver after the test: %v", err)
		}
	})
	if err := e.cluster.StopAPIServer(); err != nil {
		e.t.Fatalf("stop kube-apiserver: %v", err)
	}
	return time.Now()
}

func (e *env) startAPIServer() time.Time {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.cluster.StartAPIServer(ctx); err != nil {
		e.t.Fatalf("restart kube-apiserver: %v", err)
	}
	return time.Now()
}

// countingProxy is the API server behind a load balancer, for one test: it
// counts the connections a client opens (see testcluster.Proxy).
type countingProxy struct {
	*testcluster.Proxy
	adminKubeconfig string // the cluster's, which kubeconfig points at the proxy
}

// startCountingProxy puts a counting proxy before the test's API server.
func (e *env) startCountingProxy() *countingProxy {
	e.t.Helper()
	p, err := testcluster.StartProxy(e.cluster.RESTConfig.Host)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = p.Close() })
	return &countingProxy{Proxy: p, adminKubeconfig: e.cluster.Kubeconfig}
}

// kubeconfig writes the admin kubeconfig with the proxy as its server.
func (p *countingProxy) kubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "via-proxy.kubeconfig")
	if err := p.WriteKubeconfig(p.adminKubeconfig, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitDownstreamBytes waits until the API server has sent the client more
// than before bytes: a watch event reached the client's socket.
func (p *countingProxy) waitDownstreamBytes(t *testing.T, before int64, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return p.BytesDown() > before, nil
	})
	if err != nil {
		t.Fatalf("no data from the API server reached the controller within %s", timeout)
	}
}

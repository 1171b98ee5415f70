package e2e

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
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
	return !exited && syscall.Kill(c.Cmd.Process.Pid, 0) == nil
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
// whose labels contain every one of labels (e.g. `action="Apply"`).
func metricSum(body, name string, labels ...string) float64 {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue // a longer name with the same prefix
		}
		matches := true
		for _, l := range labels {
			matches = matches && strings.Contains(rest, l)
		}
		if !matches {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// stopAPIServer stops kube-apiserver of the shared cluster. Whatever happens
// next, the test's cleanup starts it again, so later tests find it healthy.
func (e *env) stopAPIServer() time.Time {
	e.t.Helper()
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// "already running" is the normal case: the test restarted it itself.
		if err := cluster.StartAPIServer(ctx); err != nil && !strings.Contains(err.Error(), "already running") {
			e.t.Errorf("restart kube-apiserver after the test: %v", err)
		}
	})
	if err := cluster.StopAPIServer(); err != nil {
		e.t.Fatalf("stop kube-apiserver: %v", err)
	}
	return time.Now()
}

func (e *env) startAPIServer() time.Time {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cluster.StartAPIServer(ctx); err != nil {
		e.t.Fatalf("restart kube-apiserver: %v", err)
	}
	return time.Now()
}

// countingProxy forwards TCP connections to the API server and counts them.
// A client cannot reach a stopped API server without opening a connection,
// so during an outage the count is the number of its attempts.
type countingProxy struct {
	addr     string
	upstream string
	conns    atomic.Int64 // accepted connections
	down     atomic.Int64 // bytes sent from the API server to the client
	listener net.Listener
	wg       sync.WaitGroup
}

func startCountingProxy(t *testing.T, apiURL string) *countingProxy {
	t.Helper()
	u, err := url.Parse(apiURL)
	if err != nil {
		t.Fatalf("parse API server URL: %v", err)
	}
	// The serving certificate names 127.0.0.1, so TLS through the proxy on the
	// same address verifies as it does directly.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &countingProxy{addr: l.Addr().String(), upstream: u.Host, listener: l}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		_ = l.Close()
		p.wg.Wait()
	})
	return p
}

func (p *countingProxy) serve() {
	defer p.wg.Done()
	for {
		conn, err := p.listener.Accept()
		if err != nil {
			return
		}
		p.conns.Add(1)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.forward(conn)
		}()
	}
}

func (p *countingProxy) forward(client net.Conn) {
	defer client.Close()
	server, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		return // the API server is down: the client sees its connection closed
	}
	defer server.Close()
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(server, client)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(countingWriter{client, &p.down}, server)
		done <- struct{}{}
	}()
	<-done // either side closed: close both, which ends the other copy
	_ = client.Close()
	_ = server.Close()
	<-done
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// kubeconfig writes the admin kubeconfig with the proxy as its server.
func (p *countingProxy) kubeconfig(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + p.addr
	}
	path := filepath.Join(t.TempDir(), "via-proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}

// waitDownstreamBytes waits until the API server has sent the client more
// than before bytes: a watch event reached the client's socket.
func (p *countingProxy) waitDownstreamBytes(t *testing.T, before int64, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return p.down.Load() > before, nil
	})
	if err != nil {
		t.Fatalf("no data from the API server reached the controller within %s", timeout)
	}
}

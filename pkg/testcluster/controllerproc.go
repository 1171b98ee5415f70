package testcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
)

const (
	// LocalReleaseVersion is the release version the controller reports on the
	// local cluster (its RELEASE_VERSION), unless ControllerOptions say otherwise.
	LocalReleaseVersion = "0.0.0-local"
	// controllerStopGrace is how long the controller gets to release its lease
	// and exit after SIGTERM before SIGKILL.
	controllerStopGrace = 20 * time.Second
)

// ControllerProcess is the controller binary run as a child process against a
// cluster, for end-to-end tests and benchmarks. Only its own PID is ever
// signalled, and it dies with its parent (Pdeathsig).
type ControllerProcess struct {
	Log    string // its combined output
	Listen string // the address of its /healthz, /readyz and /metrics

	child   *child
	metrics *http.Client
}

// ControllerOptions say how to run the binary. Args follow the connection
// flags (--kubeconfig, --namespace openshift-insights, --listen on a free
// loopback port); Env is added to this process's environment, without
// POD_NAME unless Env sets it: the binary takes it as its Lease identity, and
// two controllers of one test must not share one.
type ControllerOptions struct {
	Binary     string
	Kubeconfig string
	LogPath    string
	Args       []string
	Env        []string
	// ReleaseVersion is the controller's RELEASE_VERSION; empty:
	// LocalReleaseVersion.
	ReleaseVersion string
	// MetricsAuth holds the credentials /metrics accepts (delegated
	// authentication: the cluster's admin certificate does); nil: Scrape fails.
	MetricsAuth *rest.Config
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL; zero:
	// 20 s.
	StopGrace time.Duration
}

// StartController starts the binary.
func StartController(o ControllerOptions) (*ControllerProcess, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	p := &ControllerProcess{Log: o.LogPath, Listen: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	if o.MetricsAuth != nil {
		if p.metrics, err = MetricsClient(o.MetricsAuth); err != nil {
			return nil, err
		}
	}
	if o.ReleaseVersion == "" {
		o.ReleaseVersion = LocalReleaseVersion
	}
	if o.StopGrace == 0 {
		o.StopGrace = controllerStopGrace
	}
	logFile, err := os.Create(o.LogPath)
	if err != nil {
		return nil, fmt.Errorf("create controller log: %w", err)
	}
	// kwok's nodes pull no image, so the origin :latest defaults are harmless
	// here; a RELATED_IMAGE_* in Env still overrides them.
	args := append([]string{"--kubeconfig", o.Kubeconfig, "--namespace", InsightsNamespace, "--listen", p.Listen, "--allow-default-images"}, o.Args...)
	p.child, err = startChild(childSpec{
		bin:   o.Binary,
		args:  args,
		env:   append([]string{"RELEASE_VERSION=" + o.ReleaseVersion, "POD_NAME="}, o.Env...),
		out:   logFile,
		grace: o.StopGrace,
	})
	if err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start controller: %w", err)
	}
	return p, nil
}

// PID is the process's ID.
func (p *ControllerProcess) PID() int { return p.child.pid() }

// Done is closed when the process has exited and been reaped.
func (p *ControllerProcess) Done() <-chan struct{} { return p.child.done }

// Running reports whether the process has not exited yet.
func (p *ControllerProcess) Running() bool { return !p.child.exited() }

// Stop sends SIGTERM and waits; after the grace period it sends SIGKILL. It
// reports whether the kill was needed.
func (p *ControllerProcess) Stop() (killed bool) {
	defer p.closeIdle()
	return p.child.stop()
}

// Kill sends SIGKILL, as a crash would, and waits for the exit.
func (p *ControllerProcess) Kill() {
	defer p.closeIdle()
	p.child.kill()
}

func (p *ControllerProcess) closeIdle() {
	if p.metrics != nil {
		p.metrics.CloseIdleConnections()
	}
}

// Scrape reads /metrics once.
func (p *ControllerProcess) Scrape(ctx context.Context) (*Metrics, error) {
	body, err := p.get(ctx, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scrape /metrics: %w", err)
	}
	return ParseMetrics(string(body))
}

// CollectGarbage makes the process run a full garbage collection, through
// the heap profile its server serves (/debug/pprof/heap?gc=1, behind the same
// delegated authorization as /metrics), so that a Scrape after it reads the
// heap that is really live: go_gc_heap_live_bytes is otherwise whatever the
// last collection marked, in-flight requests included. The collection runs
// before the profile is written; the profile itself is of no use here.
func (p *ControllerProcess) CollectGarbage(ctx context.Context) error {
	if _, err := p.get(ctx, "/debug/pprof/heap?gc=1"); err != nil {
		return fmt.Errorf("collect garbage: %w", err)
	}
	return nil
}

// get reads path from the process's server, with the credentials of
// ControllerOptions.MetricsAuth; a status other than 200 is an error.
func (p *ControllerProcess) get(ctx context.Context, path string) ([]byte, error) {
	if p.metrics == nil {
		return nil, errors.New("no credentials (ControllerOptions.MetricsAuth)")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+p.Listen+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.metrics.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %.200q", resp.Status, body)
	}
	return body, nil
}

// WaitScrape retries Scrape until /metrics answers (it does once the process
// serves), the process exits, or timeout passes.
func (p *ControllerProcess) WaitScrape(ctx context.Context, timeout time.Duration) (*Metrics, error) {
	var m *Metrics
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if !p.Running() {
			return false, errors.New("the controller exited")
		}
		m, last = p.Scrape(ctx)
		return last == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("scrape /metrics of controller %d: %w (last error: %v)", p.PID(), err, last)
	}
	return m, nil
}

// State is the machine's state the controller reports in /metrics.
func (p *ControllerProcess) State(ctx context.Context) (string, error) {
	m, err := p.Scrape(ctx)
	if err != nil {
		return "", err
	}
	return m.State(), nil
}

// MetricsClient returns an HTTP client for the controller's /metrics: it
// authenticates with cfg's client certificate (delegated authentication accepts
// the cluster's admin certificate) and accepts the self-signed serving cert.
func MetricsClient(cfg *rest.Config) (*http.Client, error) {
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("metrics client: %w", err)
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{}
	}
	tlsConfig.RootCAs, tlsConfig.InsecureSkipVerify = nil, true
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: 10 * time.Second}, nil
}

package testcluster

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// ControllerProcess is the controller binary run as a child process against a
// cluster, for end-to-end tests and benchmarks. Only its own PID is ever
// signalled, and it dies with its parent (Pdeathsig).
type ControllerProcess struct {
	Cmd    *exec.Cmd
	Log    string // its combined output
	Listen string // the address of its /healthz, /readyz and /metrics
	done   chan struct{}
}

// ControllerOptions say how to run the binary. Args follow the connection
// flags (--kubeconfig, --namespace openshift-insights, --listen on a free
// loopback port); Env is added to this process's environment.
type ControllerOptions struct {
	Binary     string
	Kubeconfig string
	LogPath    string
	Args       []string
	Env        []string
}

// StartController starts the binary.
func StartController(o ControllerOptions) (*ControllerProcess, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	p := &ControllerProcess{Log: o.LogPath, Listen: fmt.Sprintf("127.0.0.1:%d", ports[0]), done: make(chan struct{})}
	logFile, err := os.Create(o.LogPath)
	if err != nil {
		return nil, fmt.Errorf("create controller log: %w", err)
	}
	args := append([]string{"--kubeconfig", o.Kubeconfig, "--namespace", InsightsNamespace, "--listen", p.Listen}, o.Args...)
	p.Cmd = exec.Command(o.Binary, args...)
	p.Cmd.Env = append(os.Environ(), o.Env...)
	p.Cmd.Stdout, p.Cmd.Stderr = logFile, logFile
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.Cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start controller: %w", err)
	}
	go func() {
		_ = p.Cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// PID is the process's ID.
func (p *ControllerProcess) PID() int { return p.Cmd.Process.Pid }

// Done is closed when the process has exited and been reaped.
func (p *ControllerProcess) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM and waits; after grace it sends SIGKILL. It reports
// whether the kill was needed.
func (p *ControllerProcess) Stop(grace time.Duration) (killed bool) {
	select {
	case <-p.done:
		return false
	default:
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return false
	case <-time.After(grace):
		p.Kill()
		return true
	}
}

// Kill sends SIGKILL, as a crash would, and waits for the exit.
func (p *ControllerProcess) Kill() {
	_ = p.Cmd.Process.Kill()
	<-p.done
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

package testcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// waitFor polls cond until it holds, a component exits, or timeout passes. Errors
// from cond count as "not yet" (the API server may still be warming up); the last
// one is reported on timeout.
func (c *Cluster) waitFor(ctx context.Context, what string, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	return c.waitForEvery(ctx, what, pollInterval, timeout, cond)
}

// waitForEvery is waitFor, polling every interval.
func (c *Cluster) waitForEvery(ctx context.Context, what string, interval, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	var lastErr, exitErr error
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		if exitErr = c.Exited(); exitErr != nil {
			return false, exitErr
		}
		ok, err := cond(ctx)
		if err != nil {
			lastErr = err
			return false, nil
		}
		return ok, nil
	})
	switch {
	case err == nil:
		return nil
	case exitErr != nil:
		return fmt.Errorf("wait for %s: %w", what, exitErr)
	case lastErr != nil:
		return fmt.Errorf("wait for %s: %w (last error: %v)", what, err, lastErr)
	default:
		return fmt.Errorf("wait for %s: %w", what, err)
	}
}

// Exited returns nil while every component runs, and otherwise an error
// naming one that has exited, with the end of its log. A test that fails
// after a component died (kwok: then no pod ever becomes ready) says so.
func (c *Cluster) Exited() error {
	if proc := c.exitedProcess(); proc != nil {
		return proc.exitError()
	}
	return nil
}

// exitedProcess returns a component that has exited. While Start or
// StartAPIServer waits, any exit is a failure worth reporting at once.
func (c *Cluster) exitedProcess() *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.child != nil && p.child.exited() {
			return p
		}
	}
	return nil
}

func (c *Cluster) waitAPIServerReady(ctx context.Context) error {
	client, err := readyzClient(c.pki.caPEM)
	if err != nil {
		return err
	}
	return c.waitFor(ctx, "kube-apiserver /readyz", 2*time.Minute, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, client, c.RESTConfig.Host+"/readyz"), nil
	})
}

// readyzClient calls the API server anonymously, which the default RBAC allows
// for health endpoints, trusting only the cluster's CA.
func readyzClient(caPEM []byte) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("parse cluster CA")
	}
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}, nil
}

func httpOK(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

package testcluster

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// apiServerGrace is kube-apiserver's grace period, at every stop. It is short:
// with its clients still watching, kube-apiserver drains for up to its request
// timeout (a minute) after SIGTERM. etcd holds the data, so a SIGKILL loses
// nothing, and an abrupt end is what the fault tests want.
const apiServerGrace = 2 * time.Second

// StopAPIServer stops kube-apiserver only (SIGTERM, SIGKILL after a short grace);
// etcd and its data stay, and so do the controllers and kwok, which retry until
// it is back. For fault tests.
func (c *Cluster) StopAPIServer() error {
	c.mu.Lock()
	api := c.apiserver
	c.mu.Unlock()
	if api == nil {
		return errors.New("kube-apiserver was never started")
	}
	began := time.Now()
	api.stop()
	logf(c.opts.Log, "kube-apiserver (pid %d) stopped in %s", api.pid(), since(began))
	return nil
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the same
// port, certificates and etcd, waits for /readyz, and then restarts kwok so
// the node agents resync their pods, as kubelets do.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	old := c.apiserver
	if c.stopped || old == nil {
		c.mu.Unlock()
		return errors.New("cluster is not running")
	}
	if old.running() {
		c.mu.Unlock()
		return errors.New("kube-apiserver is already running")
	}
	restarted := newProcess(old.name, old.bin, c.Dir, old.grace, old.args...)
	if err := restarted.start(); err != nil {
		c.mu.Unlock()
		return err
	}
	for i, p := range c.procs {
		if p == old {
			c.procs[i] = restarted
		}
	}
	c.apiserver = restarted
	c.mu.Unlock()

	began := time.Now()
	if err := c.waitAPIServerReady(ctx); err != nil {
		return fmt.Errorf("restart kube-apiserver: %w\n%s", err, tailFile(restarted.logPath, 20))
	}
	logf(c.opts.Log, "kube-apiserver (pid %d) ready again in %s", restarted.pid(), since(began))
	// A kubelet's status manager sends every pod's status again on its sync
	// period, so a status write lost to the outage is made good within
	// seconds. kwok does not: a pod status patch that fails with anything but
	// "connection refused" (a reset or EOF from the stopping server) is
	// dropped, and its watch resumes without a relist when it can, so that pod
	// stays unready for good (one CI run: a DaemonSet created as the API
	// server stopped never became available). Restarting kwok relists and
	// replays every pod's stages, which is what the kubelets' resync would do.
	if err := c.restartKwok(ctx, ""); err != nil {
		return fmt.Errorf("resync the node agents after the kube-apiserver restart: %w", err)
	}
	return nil
}

package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// podReadyStage is the kwok stage (bin/kwok-stages.yaml) that makes a
// Pending pod Running and Ready; HoldPods narrows its selector.
const podReadyStage = "pod-ready"

// HoldPods makes kwok leave the pods it has not made ready yet on nodes
// Pending and not ready, as a node whose kubelet never starts a container
// would: the pod-ready stage gets a selector that excludes pods whose
// spec.nodeName is one of nodes. HoldPods() with no node lifts the hold, and
// kwok then makes those pods ready. kwok reads its stages only at start, so
// it is restarted with the new stages; the old process has exited before the
// new one starts, so no pod of a held node is made ready in between. Pods
// that are ready already stay as they are.
func (c *Cluster) HoldPods(ctx context.Context, nodes ...string) error {
	stages, err := os.ReadFile(c.bin(kwokStagesFile))
	if err != nil {
		return fmt.Errorf("read kwok stages: %w", err)
	}
	if len(nodes) > 0 {
		if stages, err = holdPodsOn(stages, nodes); err != nil {
			return err
		}
	}
	path := filepath.Join(c.Dir, kwokStagesFile)
	if err := os.WriteFile(path, stages, 0o644); err != nil {
		return fmt.Errorf("write kwok stages: %w", err)
	}
	return c.restartKwok(ctx, path)
}

// holdPodsOn returns the stages with the pod-ready stage's selector
// excluding pods on nodes. Documents are re-encoded one by one; the stage
// templates are strings and pass through unchanged.
func holdPodsOn(stages []byte, nodes []string) ([]byte, error) {
	var out [][]byte
	found := false
	for _, doc := range bytes.Split(stages, []byte("\n---\n")) {
		if len(bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---")))) == 0 {
			continue
		}
		var stage map[string]any
		if err := yaml.Unmarshal(doc, &stage); err != nil {
			return nil, fmt.Errorf("parse kwok stage: %w", err)
		}
		meta, _ := stage["metadata"].(map[string]any)
		if meta["name"] == podReadyStage {
			spec, _ := stage["spec"].(map[string]any)
			selector, _ := spec["selector"].(map[string]any)
			if selector == nil {
				return nil, fmt.Errorf("kwok stage %s has no selector", podReadyStage)
			}
			exprs, _ := selector["matchExpressions"].([]any)
			selector["matchExpressions"] = append(exprs, map[string]any{
				"key": ".spec.nodeName", "operator": "NotIn", "values": slices.Clone(nodes),
			})
			found = true
		}
		encoded, err := yaml.Marshal(stage)
		if err != nil {
			return nil, fmt.Errorf("encode kwok stage: %w", err)
		}
		out = append(out, encoded)
	}
	if !found {
		return nil, fmt.Errorf("no kwok stage named %s in %s", podReadyStage, kwokStagesFile)
	}
	return append([]byte("---\n"), bytes.Join(out, []byte("---\n"))...), nil
}

// restartKwok restarts kwok with the stages file at path ("" keeps its own).
func (c *Cluster) restartKwok(ctx context.Context, path string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	old := c.kwok
	stopped := c.stopped
	c.mu.Unlock()
	if stopped || old == nil {
		return errors.New("restart kwok: the cluster is not running")
	}
	old.stop()
	ports, err := freePorts(1)
	if err != nil {
		return fmt.Errorf("restart kwok: %w", err)
	}
	health := fmt.Sprintf("127.0.0.1:%d", ports[0])
	args := slices.Clone(old.args)
	for i, a := range args {
		switch {
		case path != "" && strings.HasPrefix(a, "--config="):
			args[i] = "--config=" + path
		case strings.HasPrefix(a, "--server-address="):
			args[i] = "--server-address=" + health
		}
	}
	restarted := newProcess(old.name, old.bin, c.Dir, old.grace, args...)
	restarted.env = old.env
	began := time.Now()
	if err := c.replace(old, restarted); err != nil {
		return fmt.Errorf("restart kwok: %w", err)
	}
	// kwok lists nodes and pods before it serves /healthz, and exits
	// if a list fails; an API server stopped in that window (the next outage
	// of a fault test) would leave no node agent at all, as one CI run did.
	// So the restart is done only once kwok serves.
	err = c.waitFor(ctx, "kwok /healthz", time.Minute, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, http.DefaultClient, "http://"+health+"/healthz"), nil
	})
	if err != nil {
		return fmt.Errorf("restart kwok: %w", err)
	}
	logf(c.opts.Log, "kwok restarted (pid %d, serving in %s) with stages %q", restarted.pid(), since(began), path)
	return nil
}

// replace starts proc in place of the kwok process old.
func (c *Cluster) replace(old, proc *process) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("the cluster was stopped")
	}
	if err := proc.start(); err != nil {
		return err
	}
	for i, p := range c.procs {
		if p == old {
			c.procs[i] = proc
		}
	}
	c.kwok = proc
	return nil
}

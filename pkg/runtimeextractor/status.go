package runtimeextractor

import (
	"cmp"
	"fmt"
	"slices"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/config/clusteroperator/v1helpers"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// Status returns what the controller knows now, from any goroutine; status.Conditions of it are the conditions a host
// aggregates. Before Run's first observation it is the zero Snapshot (conditions Unknown [Starting]).
func (c *Controller) Status() status.Snapshot {
	c.pub.mu.Lock()
	defer c.pub.mu.Unlock()
	return c.pub.snapshot
}

// StatusChanged is notified, coalesced, each time Status changes (for a single consumer).
func (c *Controller) StatusChanged() <-chan struct{} { return c.pub.changed }

// report publishes the snapshot to Status, the gauges and the status writer.
func (c *Controller) report() {
	s := c.snapshot()
	// While the controller holds, its machine's state says nothing of the cluster.
	c.cfg.metrics.SetHolding(s.Holding)
	c.pub.mu.Lock()
	changed := !s.Equal(c.pub.snapshot)
	c.pub.snapshot = s
	c.pub.mu.Unlock()
	if !changed {
		return
	}
	notify(c.pub.changed)
	conds := status.Conditions(s)
	c.cfg.metrics.SetDegraded(degradedReason(conds))
	if c.status != nil {
		c.status.offer(s, conds)
	}
}

// degradedReason is the reason of RuntimeExtractorDegraded=True, "" when it is not True.
func degradedReason(conds []configv1.ClusterOperatorStatusCondition) string {
	if d := v1helpers.FindStatusCondition(conds, status.ConditionDegraded); d != nil && d.Status == configv1.ConditionTrue {
		return d.Reason
	}
	return ""
}

// snapshot includes what the cluster shows, so a replica started now reports as one run all along.
func (c *Controller) snapshot() status.Snapshot {
	s := status.Snapshot{
		State:   c.machine.State(),
		Version: c.core.Version(),
		Holding: c.holding(),

		FailurePersists: c.core.Persists(c.cfg.clock.Now()),
	}
	s.Failures, s.RetryIn = c.core.Failures()
	s.LastError = c.core.LastError()
	if ds, ok := c.informer.current(); ok {
		r := resources.RolloutOf(ds)
		s.Present = true
		s.Desired, s.Updated, s.Available = r.Desired, r.Updated, r.Available
		s.AppliedVersion = ds.Annotations[resources.VersionAnnotation]
		s.RolledOut = r.Complete()
		s.MaxUnavailable = -1
		if n, ok := resources.MaxUnavailable(ds); ok {
			s.MaxUnavailable = n
		}
		s.UnavailableNodes = c.rollouts.unavailable.nodes
		s.UnavailableNodesDenied = c.rollouts.unavailable.denied
	}
	s.Finalizers, s.Terminating = c.informer.terminating()
	s.ConfigError = configError(c.config)
	s.Stuck = c.rollouts.stuck
	s.Conflict = c.conflict()
	s.RepairWaits = c.waiting()
	s.TLSProfileUnknown = c.tlsUnknown
	return s
}

// stuckChanged reports a new stuck verdict, or its end.
func (c *Controller) stuckChanged() {
	stuck := c.rollouts.stuck
	c.cfg.metrics.SetRolloutStuck(stuck != nil)
	if stuck == nil {
		klog.Info("the rollout progresses again")
		return
	}
	msg := stuck.Message(c.snapshot())
	klog.Warningf("rollout stuck: %s", msg)
	if ds, ok := c.informer.current(); ok {
		c.events.failed(ds, ReasonRolloutStuck, msg)
	}
}

// backoffNote says, for the log, why a repair waits.
func (c *Controller) backoffNote() string {
	now, p, log := c.cfg.clock.Now(), c.core.Policy(), c.core.Log()
	note, sep := fmt.Sprintf("%d of %d repairs left in the budget", p.Available(log, now), p.Burst), "; "
	for _, w := range log.Writers() {
		if len(w.Undos) > 0 {
			note += fmt.Sprintf("%s%s undid %d", sep, w.Name, len(w.Undos))
			sep = ", "
		}
	}
	return note
}

// waiting is the repair the budget holds back, for status; nil when none is, it waits only for
// quiet, or its wait ends within StatusMaxDelay (two status writes for nothing).
func (c *Controller) waiting() *status.RepairWait {
	now, p, log := c.cfg.clock.Now(), c.core.Policy(), c.core.Log()
	if !c.core.Deferring() || !p.BudgetAllows(log, 1).After(now) {
		return nil
	}
	_, dec := p.Due(log, now)
	if dec.At.Sub(now) < StatusMaxDelay {
		return nil
	}
	w := &status.RepairWait{At: dec.At}
	for _, wr := range log.Writers() {
		if wr.Outstanding {
			w.Writers = append(w.Writers, wr.Name)
		}
	}
	return w
}

// conflict is the fights for status (nil for none), over the longest of them.
func (c *Controller) conflict() *status.ConflictingWriter {
	now := c.cfg.clock.Now()
	out := &status.ConflictingWriter{RepairEvery: c.core.Policy().Every}
	for _, w := range c.core.Log().Writers() {
		if w.Fight {
			out.Repairs += w.FightUndos
			out.For = max(out.For, now.Sub(w.FightSince))
			out.Writers = append(out.Writers, status.WriterCount{Manager: w.Name, Repairs: w.FightUndos})
		}
	}
	if len(out.Writers) == 0 {
		return nil
	}
	slices.SortFunc(out.Writers, func(a, b status.WriterCount) int {
		return cmp.Or(cmp.Compare(b.Repairs, a.Repairs), cmp.Compare(a.Manager, b.Manager))
	})
	return out
}

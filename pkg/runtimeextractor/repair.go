package runtimeextractor

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// The loop's side of drift and repairs: it classifies a drain (drift.go),
// asks the repair gate (repairgate.go) when to repair, and logs, records and
// sets gauges on the answers.

// onDrift acts on the drift the informer observed (hint: a caller's
// informer said something changed, with no observations). One log line
// reports the whole drain.
func (c *Controller) onDrift(ctx context.Context, hint bool) {
	obs := c.informer.drainDrift()
	if c.holding() {
		return
	}
	for _, o := range obs {
		if o.kind == DriftDeleted {
			c.manager.ObservedDeletion(o.uid)
		}
	}
	ds, present := c.informer.current()
	d := classifyDrain(obs, ds, c.manager, c.machine.State(), c.deletedByUs)
	if c.metrics != nil {
		for _, k := range d.kinds {
			c.metrics.ObserveDrift(string(k))
		}
	}
	c.gate.describe(d)
	drifted := hint || len(d.kinds) > 0
	var wait time.Duration
	switch {
	case drifted && c.level() == (fsm.Enabled{}): // only repairs back off; a delete of what insights-config disables does not
		var ended bool
		wait, ended = c.gate.changed(d)
		if ended {
			c.fightStood()
		}
		if wait == 0 {
			c.fireDrift(ctx)
		}
	case drifted:
		c.fireDrift(ctx)
	case d.gone && !present && c.machine.State() == fsm.StateDeleting:
		c.fire(ctx, fsm.Deleted{}) // our delete went through, though its call failed
	}
	switch {
	case len(d.kinds) == 0:
	case wait > 0:
		klog.Infof("DaemonSet %s/%s was %s; repairing it in %s (repair backoff: %s)",
			resources.Namespace, resources.DaemonSetName, driftSummary(d.kinds, d.editors, d.unnamed),
			wait.Round(time.Millisecond), c.gate.backoffNote())
	default: // logged after the repair's write: act first, report after
		klog.Infof("DaemonSet %s/%s was %s; acted on it, now %s",
			resources.Namespace, resources.DaemonSetName, driftSummary(d.kinds, d.editors, d.unnamed), c.machine.State())
	}
}

// fireDrift fires the drift of the DaemonSet the view shows now: Deleted
// when it is gone, else Modified.
func (c *Controller) fireDrift(ctx context.Context) {
	c.gate.repairing()
	if ds, ok := c.informer.current(); ok {
		c.fire(ctx, fsm.Modified{Generation: ds.Generation})
		return
	}
	c.fire(ctx, fsm.Deleted{})
}

// onGateDue acts on the repair gate's timer: the deferred repair, if the
// level still wants it, and the end of a fight.
func (c *Controller) onGateDue(ctx context.Context) {
	repair, ended := c.gate.due(c.level() == (fsm.Enabled{}))
	if ended {
		c.fightStood()
	}
	if repair {
		c.fireDrift(ctx)
	}
}

// repairMade counts a repair that wrote, and reports a fight it starts: log,
// Warning Event, gauge.
func (c *Controller) repairMade(ds *appsv1.DaemonSet) {
	if c.metrics != nil {
		c.metrics.ObserveRepair(repairManagers(c.gate.pending.editors)...) // one repair: "other" once
	}
	started, ended := c.gate.repaired()
	if ended {
		c.fightStood()
	}
	if !started {
		return
	}
	msg := c.degradedMessage()
	klog.Warningf("tug-of-war over DaemonSet %s/%s: %s", resources.Namespace, resources.DaemonSetName, msg)
	c.events.conflict(ds, msg)
	if c.metrics != nil {
		c.metrics.SetConflictingWriter(true)
	}
}

// endFight forgets the repair streak: Run ends, or there is nothing left to
// fight over.
func (c *Controller) endFight(why string) {
	if c.gate.reset() {
		c.fightOver(why)
	}
}

// fightStood reports the end of the last fight: its latest repair stood.
func (c *Controller) fightStood() {
	c.fightOver("the latest repair stood for " + c.gate.backoff().Quiet.String())
}

func (c *Controller) fightOver(why string) {
	klog.Infof("the tug-of-war over DaemonSet %s/%s is over (%s): repairs are immediate again", resources.Namespace, resources.DaemonSetName, why)
	if c.metrics != nil {
		c.metrics.SetConflictingWriter(false)
	}
}

package runtimeextractor

import (
	"context"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// onDrift acts on the drift the informer observed (hint: a caller's informer
// said something changed, unobserved), with one log line for the drain.
func (c *Controller) onDrift(ctx context.Context, hint bool) {
	obs := c.informer.drainDrift()
	if c.holding() {
		return
	}
	if c.manager.AwaitsOwnWrite() {
		// A list without a DaemonSet, while an own write is awaited in the
		// cache, may predate that write (a lagging watch cache): it tells
		// nothing of it. If the write is gone, the expectation's timeout
		// re-reads the server.
		obs = slices.DeleteFunc(obs, func(o observation) bool { return o.kind == DriftDeleted && o.uid == "" })
	}
	for _, o := range obs {
		if o.kind == DriftDeleted {
			c.manager.ObservedDeletion(o.uid)
		}
	}
	ds, present := c.informer.current()
	d := classifyDrain(obs, ds, c.manager, c.machine.State(), c.deletedByUs)
	for _, k := range d.kinds {
		c.cfg.metrics.ObserveDrift(string(k))
	}
	c.describeRepair(d)
	act, wait, fc := c.core.OnDrift(core.Drift{Changed: hint || len(d.kinds) > 0, Writers: writersOf(d), Gone: d.gone, Present: present,
		Enabled: c.level() == (fsm.Enabled{}), Deleting: c.machine.State() == fsm.StateDeleting}, c.cfg.clock.Now())
	c.fightMoved(fc)
	switch act {
	case core.DriftRepair:
		c.fireDrift(ctx)
	case core.DriftReassert:
		c.reassert(ctx)
	case core.DriftDeleted:
		c.fire(ctx, fsm.Deleted{}) // our delete went through, though its call failed
	}
	switch {
	case len(d.kinds) == 0:
	case wait > 0:
		klog.Infof("DaemonSet %s/%s was %s; repairing it in %s (repair gate: %s)",
			resources.Namespace, resources.DaemonSetName, driftSummary(d.kinds, d.writers, d.unnamed),
			wait.Round(time.Millisecond), c.backoffNote())
	default: // logged after the repair's write: act first, report after
		klog.Infof("DaemonSet %s/%s was %s; acted on it, now %s",
			resources.Namespace, resources.DaemonSetName, driftSummary(d.kinds, d.writers, d.unnamed), c.machine.State())
	}
}

func (c *Controller) fireDrift(ctx context.Context) {
	if ds, ok := c.informer.current(); ok {
		c.fire(ctx, fsm.Modified{Generation: ds.Generation})
		return
	}
	c.fire(ctx, fsm.Deleted{})
}

func (c *Controller) onGateDue(ctx context.Context) {
	repair, fc := c.core.GateDue(c.level() == (fsm.Enabled{}), c.cfg.clock.Now())
	c.fightMoved(fc)
	if repair {
		c.fireDrift(ctx)
	}
}

func (c *Controller) fightMoved(fc core.FightChange) {
	if fc.Ended {
		c.fightOver("the writers stopped undoing repairs")
	}
	if !fc.Started {
		return
	}
	msg := c.degradedMessage()
	if fight := c.conflict(); fight != nil {
		msg += "; " + fight.Tally()
	}
	klog.Warningf("tug-of-war over DaemonSet %s/%s: %s", resources.Namespace, resources.DaemonSetName, msg)
	ds, _ := c.informer.current()
	c.events.conflict(ds, msg)
	c.cfg.metrics.SetConflictingWriter(true)
}

// endFight forgets the writers when Run ends or nothing is left to fight over.
func (c *Controller) endFight(why string) {
	c.known.next = nextRepair{}
	if c.core.ForgetWriters() {
		c.fightOver(why)
	}
}

func (c *Controller) fightOver(why string) {
	klog.Infof("the tug-of-war over DaemonSet %s/%s is over (%s)", resources.Namespace, resources.DaemonSetName, why)
	c.cfg.metrics.SetConflictingWriter(false)
}

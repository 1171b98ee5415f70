package runtimeextractor

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// fire carries out the chain of actions and outcomes ev leads to; each write comes first, its Event after,
// asynchronously. An apply that changed nothing produces no watch event, so its rollout is read from the cache.
func (c *Controller) fire(ctx context.Context, ev fsm.Event) {
	if ev == nil || c.holding() {
		return
	}
	applied := false
	for ev != nil {
		t, err := c.machine.Fire(ev)
		if err != nil {
			klog.Errorf("state machine: %v", err)
			return
		}
		ev = nil // the action's outcome, if it has one
		switch t.Action {
		case fsm.ActionApply:
			var wrote bool
			ev, wrote = c.executeApply(ctx, t)
			applied = applied || wrote
		case fsm.ActionDelete:
			ev = c.executeDelete(ctx, t)
		case fsm.ActionRetry:
			c.scheduleRetry()
		}
	}
	if applied {
		c.onRollout(ctx)
	}
}

func (c *Controller) executeApply(ctx context.Context, t fsm.Transition) (fsm.Event, bool) {
	// The core decides every apply, whatever led to it, and counts it
	// (core.State.AskWrite, Wrote); one it holds back is made by the gate's
	// deadline.
	w := c.core.AskWrite(c.cfg.clock.Now())
	if !w.Allowed {
		klog.V(2).Infof("%s on %s: the repair it would make waits for the repair gate (%s)", t.From, fsm.Describe(t.Event), c.backoffNote())
		return nil, false
	}
	start := c.cfg.clock.Now()
	actx, cancel := context.WithTimeout(ctx, actionTimeout)
	res, err := c.apply(actx)
	cancel()
	if res.Replaced != "" {
		c.rememberDeleted(res.Replaced, false) // its delete event is this apply's, not drift
	}
	outcome := applyOutcome(res, err)
	if c.core.Wrote(w, outcome, c.cfg.clock.Now()) {
		c.cfg.metrics.ObserveRepair(repairManagers(c.core.NextRepair().Edits)...) // one repair: "other" once
	}
	if outcome == core.ApplyLost {
		// No failure: the other writer's change reaches the repair gate as drift.
		klog.V(2).Infof("%s on %s: %v", t.From, fsm.Describe(t.Event), err)
		return nil, false
	}
	c.record(t.Action, err, c.cfg.clock.Since(start))
	if err != nil {
		return fsm.ApplyFailed{Err: err}, false
	}
	if res.Changed {
		cause := c.core.Cause(t, w.Repair, res.TLSMoved)
		if w.Repair {
			cause.Restored = res.Restored
		}
		why := cause.Why(res.Created)
		if res.Replaced != "" {
			why = fmt.Sprintf("replaced %s, which someone else created: %s", res.Replaced, res.ReplacedBecause)
		}
		c.events.applied(res.Object, res.Created, why)
	}
	uid := string(res.Object.UID)
	if res.Rolls {
		return fsm.Applied{UID: uid, Generation: res.Generation}, true
	}
	return fsm.AppliedUnchanged{UID: uid, Generation: res.Generation}, true
}

func applyOutcome(res resources.Result, err error) core.ApplyOutcome {
	switch {
	case errors.Is(err, resources.ErrLostToAnotherWriter):
		return core.ApplyLost
	case err != nil && res.Unanswered:
		return core.ApplyUnanswered
	case err != nil:
		return core.ApplyFailed
	case res.Changed:
		return core.ApplyChanged
	}
	return core.ApplyUnchanged
}

func (c *Controller) executeDelete(ctx context.Context, t fsm.Transition) fsm.Event {
	start := c.cfg.clock.Now()
	actx, cancel := context.WithTimeout(ctx, actionTimeout)
	deleted, err := c.manager.Delete(actx)
	cancel()
	c.record(t.Action, err, c.cfg.clock.Since(start))
	if err != nil {
		return fsm.DeleteFailed{Err: err}
	}
	if deleted != "" {
		c.rememberDeleted(deleted, true)
		c.events.deleted()
	}
	return fsm.DeleteDone{}
}

// rememberDeleted: the view hides an own delete's object until the cache drops it (a quick
// re-enable must create, not adopt it); its event is never drift.
func (c *Controller) rememberDeleted(uid types.UID, disabling bool) {
	c.informer.markGone(uid)
	c.core.OwnDelete(uid, disabling)
}

func (c *Controller) apply(ctx context.Context) (resources.Result, error) {
	if c.cfg.imagesErr != nil {
		return resources.Result{}, fmt.Errorf("refusing to apply: %w", c.cfg.imagesErr)
	}
	d := resources.Desired{Images: *c.cfg.images, Version: c.core.Version(), TLSProfile: c.cfg.tlsProfile}
	if cfg := c.config.Config(); cfg != nil {
		d.Scheduling = cfg.DataReporting.RuntimeExtractor
	}
	from, _ := c.informer.current()
	c.desiredTLS(&d, from)
	return c.manager.Apply(ctx, d)
}

// onRollout fires RolloutComplete when the machine has a use for it; not while an apply
// waits for the gate or lost a race: what is rolled out is not what the level wants.
func (c *Controller) onRollout(ctx context.Context) {
	ds, ok := c.informer.current()
	if !ok || !resources.RolloutOf(ds).Complete() || !c.core.RolloutCounts() {
		return
	}
	if ev := (fsm.RolloutComplete{UID: string(ds.UID), Generation: ds.Generation}); c.machine.Moves(ev) {
		c.fire(ctx, ev)
	}
}

func (c *Controller) transitioned(t fsm.Transition) {
	c.cfg.metrics.ObserveTransition(t)
	if t.Note != "" {
		klog.V(2).Infof("%s on %s: %s", t.From, fsm.Describe(t.Event), t.Note)
	}
	if !t.Changed() {
		klog.V(4).Infof("%s on %s: stays, action %s", t.From, fsm.Describe(t.Event), t.Action)
		return
	}
	klog.Infof("state %s -> %s on %s, action %s", t.From, t.To, fsm.Describe(t.Event), t.Action)
	if c.core.Transitioned(t.To) {
		c.fightOver("insights-config disables the runtime extractor")
	}
}

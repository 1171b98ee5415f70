package runtimeextractor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// step is one wake-up: it feeds in to the core, then InputSettle (the wake-up is done: arm the timer,
// report), and carries out the effects the core returns, in order. An effect that yields an input (an
// action's outcome, the drained drift) feeds it back, and the core's answer is carried out before the
// effects after it: a chain of actions completes first.
func (c *Controller) step(ctx context.Context, in core.Input) {
	in.DriftQueued = c.informer.driftQueued()
	inputs := []core.Input{in, {Kind: core.InputSettle}}
	if in.Kind == core.InputSettle {
		inputs = inputs[:1]
	}
	for _, in := range inputs {
		for queue := c.feed(in); len(queue) > 0; {
			next, ok := c.execute(ctx, queue[0])
			if queue = queue[1:]; ok {
				queue = append(c.feed(next), queue...)
			}
		}
	}
}

// feed steps the core with in and the world as the shell sees it now.
func (c *Controller) feed(in core.Input) []core.Effect {
	in.Level, in.Version, in.Own = c.level(), c.cfg.versions.Version(), c.manager
	if ds, ok := c.informer.current(); ok {
		in.Seen = core.Seen{Present: true, UID: ds.UID, Generation: ds.Generation, Terminating: ds.DeletionTimestamp != nil,
			Version: ds.ResourceVersion, Meta: resources.OwnedMetadata(ds)}
		in.Complete = resources.RolloutOf(ds).Complete()
	}
	if in.Kind == core.InputSettle { // read once a wake-up: a timed-out expectation is reported once, then forgotten
		in.ExpectTimeout, in.Expecting = c.manager.Expecting()
	}
	return c.core.Step(in, c.cfg.clock.Now())
}

// level is the observed config as an event, nil while holding.
func (c *Controller) level() fsm.Event {
	if c.holding() {
		return nil
	}
	if cfg := c.config.Config(); cfg != nil && cfg.DataReporting.DisableRuntimeExtractor {
		return fsm.Disabled{}
	}
	return fsm.Enabled{}
}

// holding: the notifier has seen no good configuration since this process started, so the admin's choice is unknown:
// change nothing, report the error, until a valid config (or the ConfigMap's removal: the defaults) arrives.
func (c *Controller) holding() bool {
	return !hasGoodConfig(c.config)
}

// execute carries out one effect: the I/O, logs, metrics and Events. It decides nothing.
func (c *Controller) execute(ctx context.Context, e core.Effect) (next core.Input, ok bool) {
	switch e.Kind {
	case core.EffectNext:
		return e.Next, true
	case core.EffectApply:
		return core.Input{Kind: core.InputApplied, Result: c.executeApply(ctx)}, true
	case core.EffectDelete:
		return core.Input{Kind: core.InputDeleted, Result: c.executeDelete(ctx)}, true
	case core.EffectDrain:
		return core.Input{Kind: core.InputDrained, Hint: e.Hint, Observations: c.informer.drainDrift()}, true
	case core.EffectRetry: // the limiter's next backoff
		return core.Input{Kind: core.InputBackoff, Backoff: c.cfg.limiter.When(retryKey)}, true
	case core.EffectRetryArmed:
		c.cfg.metrics.SetBackoff(e.Wait)
		n, _ := c.core.Failures()
		// Capped as conditions and Events are: the error may quote a refused RELATED_IMAGE_* value at
		// any length, and this line repeats per retry.
		klog.Infof("retrying in %s after %d failure(s): %s", e.Wait.Round(time.Millisecond), n, status.CapMessage(fmt.Sprint(c.core.LastError())))
	case core.EffectHeld:
		klog.V(2).Infof("%s on %s: the repair it would make waits for the repair gate (%s)",
			e.Transition.From, fsm.Describe(e.Transition.Event), c.backoffNote())
	case core.EffectLostRace:
		klog.V(2).Infof("%s on %s: %v", e.Transition.From, fsm.Describe(e.Transition.Event), e.Err)
	case core.EffectRecorded:
		c.record(e.Action, e.Err, e.Took)
	case core.EffectRepairCounted: // one repair: "other" once
		c.cfg.metrics.ObserveRepair(repairManagers(c.core.NextRepair().Edits)...)
	case core.EffectAppliedEvent:
		ds, _ := e.Object.(*appsv1.DaemonSet)
		c.events.applied(ds, e.Created, e.Note)
	case core.EffectDeletedEvent:
		c.events.deleted()
	case core.EffectDrift:
		c.drifted(e.Drain, e.Wait)
	case core.EffectDiagnose:
		if ds, ok := c.informer.current(); ok {
			c.rollouts.expired(ctx, c.cfg.kubeClient, ds, c.cfg.clock.Now())
		}
	case core.EffectFightStarted:
		c.fightStarted()
	case core.EffectFightEnded:
		klog.Infof("the tug-of-war over DaemonSet %s/%s is over (%s)", resources.Namespace, resources.DaemonSetName,
			cmp.Or(e.Note, "the writers stopped undoing repairs"))
		c.cfg.metrics.SetConflictingWriter(false)
	case core.EffectMachineError:
		klog.Errorf("state machine: %v", e.Err)
	case core.EffectStopped: // nothing armed or remembered for a later Run
		c.tlsKept, c.tlsUnknown = nil, ""
		c.rollouts.reset()
		c.cfg.metrics.SetBackoff(0)
		c.alarm.stop()
	case core.EffectSettled:
		ds, _ := c.informer.current()
		if c.rollouts.track(ctx, c.cfg.kubeClient, c.machine.State(), ds, c.cfg.clock.Now()) {
			c.stuckChanged()
		}
		c.alarm.follow(c.core.Deadline())
		c.report()
	}
	return core.Input{}, false
}

func (c *Controller) executeApply(ctx context.Context) core.Result {
	start := c.cfg.clock.Now()
	actx, cancel := context.WithTimeout(ctx, actionTimeout)
	res, err := c.apply(actx)
	cancel()
	if res.Replaced != "" {
		c.informer.markGone(res.Replaced) // hidden until the cache drops it
	}
	r := core.Result{Outcome: applyOutcome(res, err), Err: err, OwnInput: ownInput(err), Took: c.cfg.clock.Since(start),
		Generation: res.Generation, Created: res.Created, Rolls: res.Rolls, Restored: res.Restored, TLS: res.TLSMoved,
		Replaced: res.Replaced, ReplacedBecause: res.ReplacedBecause}
	if res.Object != nil {
		r.UID, r.Object = string(res.Object.UID), res.Object
	}
	return r
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

func (c *Controller) executeDelete(ctx context.Context) core.Result {
	start := c.cfg.clock.Now()
	actx, cancel := context.WithTimeout(ctx, actionTimeout)
	deleted, err := c.manager.Delete(actx)
	cancel()
	if err == nil && deleted != "" {
		// The view hides an own delete's object until the cache drops it: a quick re-enable must
		// create, not adopt it.
		c.informer.markGone(deleted)
	}
	return core.Result{Deleted: deleted, Err: err, Took: c.cfg.clock.Since(start)}
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
}

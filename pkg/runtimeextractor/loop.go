package runtimeextractor

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// Run only receives; the rest of a wake-up is here, so the convergence model, driving these
// methods on a fake clock, checks the loop that ships.

type wake int

const (
	wakeConfig     wake = iota // insights-config (or the host's config) may have changed
	wakeVersion                // the cluster version may have changed
	wakeTLS                    // the cluster TLS profile changed
	wakeDrift                  // the informer observed changes of the DaemonSet
	wakeDriftHint              // a caller's informer says something changed
	wakeRollout                // the DaemonSet's status or generation moved
	wakeResync                 // the periodic re-assert
	wakeAlarm                  // a part's deadline has come (core.State.Due)
	wakeDiagnosis              // a stuck rollout's diagnosis is done (payload: stuckResult)
	wakeNodesNamed             // the unavailable pods' nodes are named (payload: namedResult)
)

var levelSignals = map[wake]core.Signal{wakeConfig: core.SignalConfig, wakeVersion: core.SignalVersion, wakeTLS: core.SignalTLS}

func (c *Controller) handle(ctx context.Context, w wake, payload any) {
	// Every wake-up feeds the core the queued drift first, so that the gate decides a repair
	// before any other input can write: none may make it early or ungated.
	if w != wakeDrift && w != wakeDriftHint && c.informer.driftQueued() {
		c.onDrift(ctx, false)
	}
	switch w {
	case wakeConfig, wakeVersion, wakeTLS:
		// A config signal is acted on even when the newest content was
		// rejected: the last good config may have changed in the same notification.
		c.step(ctx, core.Input{Kind: core.InputSignal, Signal: levelSignals[w]})
	case wakeDrift:
		c.onDrift(ctx, false)
	case wakeDriftHint:
		c.onDrift(ctx, true)
	case wakeRollout:
		c.onRollout(ctx)
	case wakeResync:
		c.step(ctx, core.Input{Kind: core.InputResync})
	case wakeAlarm:
		c.alarm.fired()
		// The parts due now, earliest first, each if still due after the earlier ones acted.
		now := c.cfg.clock.Now()
		for _, p := range c.core.Due(now) {
			c.step(ctx, core.Input{Kind: core.InputDeadline, Part: p, DueAt: now,
				Enabled: c.level() == (fsm.Enabled{})})
		}
	case wakeDiagnosis:
		if r, ok := payload.(stuckResult); ok && c.rollouts.accept(r) {
			c.stuckChanged()
		}
	case wakeNodesNamed:
		if r, ok := payload.(namedResult); ok {
			c.rollouts.acceptNames(r)
		}
	}
}

// step carries out, in order, what the core decides about in.
func (c *Controller) step(ctx context.Context, in core.Input) []core.Effect {
	effects := c.core.Step(in, c.cfg.clock.Now())
	for _, e := range effects {
		switch e.Kind {
		case core.EffectActOnLevel:
			c.actOnLevel(ctx, e.Signal)
		case core.EffectReassert:
			c.reassert(ctx)
		case core.EffectRepair:
			c.fireDrift(ctx)
		case core.EffectDeleteDone:
			c.fire(ctx, fsm.Deleted{})
		case core.EffectDiagnose:
			if ds, ok := c.informer.current(); ok {
				c.rollouts.expired(ctx, c.cfg.kubeClient, ds, c.cfg.clock.Now())
			}
		case core.EffectFightStarted:
			c.fightStarted()
		case core.EffectFightEnded:
			c.fightOver("the writers stopped undoing repairs")
		}
	}
	return effects
}

func (c *Controller) afterWake(ctx context.Context) {
	ds, _ := c.informer.current()
	if c.rollouts.track(ctx, c.cfg.kubeClient, c.machine.State(), ds, c.cfg.clock.Now()) {
		c.stuckChanged()
	}
	now := c.cfg.clock.Now()
	timeout, pending := c.manager.Expecting()
	c.core.FollowExpect(pending, timeout, now)
	c.core.FollowGate(now)
	c.alarm.follow(c.core.Deadline())
	c.report()
}

// start acts on the level once the caches are synced: Enabled adopts or corrects what exists,
// Disabled deletes what the cache shows.
func (c *Controller) start(ctx context.Context) {
	c.core.SeeVersion(c.cfg.versions.Version(), true) // where a Run starts is no upgrade
	if ds, ok := c.informer.current(); ok {
		klog.Infof("observed DaemonSet %s/%s generation %d at version %q", ds.Namespace, ds.Name, ds.Generation, ds.Annotations[resources.VersionAnnotation])
	}
	klog.Infof("runtime extractor controller started: target version %q", c.core.Version())
	c.reassert(ctx)
	c.afterWake(ctx)
}

// stop leaves nothing armed or remembered for a later Run.
func (c *Controller) stop() {
	if c.core.ForgetWriters() {
		c.fightOver("the controller stopped")
	}
	c.tlsKept, c.tlsUnknown = nil, ""
	c.rollouts.reset()
	c.core.Stopped()
	c.cfg.metrics.SetBackoff(0)
	c.alarm.stop()
}

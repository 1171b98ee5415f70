package runtimeextractor

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// What the loop does for each wake-up. Run (controller.go) only receives;
// everything else is here, so the convergence model, which drives these
// methods on a fake clock, checks the loop that ships.

// wake names what woke the loop.
type wake int

const (
	wakeConfig     wake = iota // insights-config (or the host's config) may have changed
	wakeVersion                // the cluster version may have changed
	wakeTLS                    // the cluster TLS profile changed
	wakeDoor                   // queued level signals may be due
	wakeDrift                  // the informer observed changes of the DaemonSet
	wakeDriftHint              // a caller's informer says something changed
	wakeRollout                // the DaemonSet's status or generation moved
	wakeRetry                  // a failed action's retry is due
	wakeResync                 // the periodic re-assert
	wakeExpect                 // an own write the cache has not shown is overdue
	wakeGate                   // the repair gate has something due
	wakeDeadline               // a rollout made no progress for the deadline
	wakeDiagnosis              // a stuck rollout's diagnosis is done (payload: stuckResult)
	wakeNodesNamed             // the unavailable pods' nodes are named (payload: namedResult)
)

var wakeNames = [...]string{
	wakeConfig: "config changed", wakeVersion: "version changed", wakeTLS: "TLS profile changed",
	wakeDoor: "front door timer", wakeDrift: "resource modified", wakeDriftHint: "caller's drift hint",
	wakeRollout: "rollout", wakeRetry: "retry timer", wakeResync: "resync timer",
	wakeExpect: "expectation timer", wakeGate: "repair gate timer", wakeDeadline: "rollout deadline",
	wakeDiagnosis: "stuck diagnosis", wakeNodesNamed: "unavailable nodes named",
}

func (w wake) String() string { return wakeNames[w] }

// handle is the loop's answer to one wake-up, with what its channel carried
// (only the background reads' results carry something); afterWake follows it.
func (c *Controller) handle(ctx context.Context, w wake, payload any) {
	switch w {
	case wakeConfig:
		// Always acted on, even when the newest content was rejected: the
		// level comes from the last good config, which may have changed in
		// the same (coalesced) notification.
		c.levelSignal(ctx, signalConfig)
	case wakeVersion:
		c.levelSignal(ctx, signalVersion)
	case wakeTLS:
		c.levelSignal(ctx, signalTLS)
	case wakeDoor:
		c.onDoorDue(ctx)
	case wakeDrift:
		c.onDrift(ctx, false)
	case wakeDriftHint:
		c.onDrift(ctx, true)
	case wakeRollout:
		c.onRollout(ctx)
	case wakeRetry:
		c.retry.fired()
		c.reassert(ctx)
	case wakeResync:
		c.reassertOnTimer(ctx)
	case wakeExpect:
		c.expect.fired()
		if !c.retry.pending() { // a failed action's retry re-reads then
			c.reassertOnTimer(ctx)
		}
	case wakeGate:
		c.gate.fired()
		c.onGateDue(ctx)
	case wakeDeadline:
		c.rollouts.fired()
		if ds, ok := c.informer.current(); ok {
			c.rollouts.expired(ctx, c.cfg.kubeClient, ds, c.cfg.clock.Now())
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

// afterWake follows every wake-up: the rollout watch, the expectation and
// repair timers follow what is now awaited, and status is reported.
func (c *Controller) afterWake(ctx context.Context) {
	ds, _ := c.informer.current()
	if c.rollouts.track(ctx, c.cfg.kubeClient, c.machine.State(), ds, c.cfg.clock.Now()) {
		c.stuckChanged()
	}
	switch d, pending := c.manager.Expecting(); {
	case !pending:
		c.expect.stop()
	case !c.expect.armed():
		c.expect.arm(d)
	}
	c.gate.follow()
	c.report()
}

// start is what Run does once the caches are synced: read the version, and
// act on the observed level. Enabled applies (adopting or correcting what
// exists), Disabled deletes what the cache shows.
func (c *Controller) start(ctx context.Context) {
	c.known.version = c.cfg.versions.Version()
	if ds, ok := c.informer.current(); ok {
		klog.Infof("observed DaemonSet %s/%s generation %d at version %q", ds.Namespace, ds.Name, ds.Generation, ds.Annotations[resources.VersionAnnotation])
	}
	klog.Infof("runtime extractor controller started: target version %q", c.known.version)
	c.reassert(ctx)
	c.afterWake(ctx)
}

// stop leaves nothing armed or remembered for a later Run: it has no memory
// of this one's repairs, queued signals, rollouts or TLS arguments.
func (c *Controller) stop() {
	c.endFight("the controller stopped")
	c.known.tlsKept, c.known.tlsUnknown = nil, ""
	c.rollouts.reset()
	c.door.reset()
	c.expect.stop()
	c.retry.stop()
}

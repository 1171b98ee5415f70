package runtimeextractor

import (
	"context"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/core"
)

// level is the observed config as an event: the level re-assert. It is nil
// while the controller holds (see holding).
func (c *Controller) level() fsm.Event {
	if c.holding() {
		return nil
	}
	if cfg := c.config.Config(); cfg != nil && cfg.DataReporting.DisableRuntimeExtractor {
		return fsm.Disabled{}
	}
	return fsm.Enabled{}
}

// reassert fires the level. An enabled level's apply, while someone else's
// change waits for the repair gate, is a repair: the executor asks the gate
// (executeApply), and the gate's timer applies the level as it is when due.
// A disabled level is no repair, and acts at once.
func (c *Controller) reassert(ctx context.Context) { c.fire(ctx, c.level()) }

// reassertOnTimer re-asserts the level for a timer (the resync, an own write
// the cache never showed), unless a repair is the repair gate's to make: one
// waits for its backoff (the gate's timer makes it when due), or the
// informer has queued drift the gate has yet to hear of (its notification
// wakes the loop next). No timer may make a repair early.
func (c *Controller) reassertOnTimer(ctx context.Context) {
	if !c.informer.driftQueued() {
		c.reassert(ctx)
	}
}

// holding: the notifier has rejected the configuration and has seen no good
// one since this process started, so the admin's choice is unknown. The
// controller then changes nothing (a present DaemonSet stays as it is, an
// absent one absent) and only reports the config error, until a valid config
// (or the ConfigMap's removal, which means the defaults) arrives.
func (c *Controller) holding() bool {
	return !c.config.HasGoodConfig()
}

// levelSignal acts on a config, version or TLS signal now, or queues it for
// the front door's trailing edge (core.State.Admit).
func (c *Controller) levelSignal(ctx context.Context, k core.Signal) {
	if c.core.Admit(k, c.cfg.clock.Now()) {
		c.actOnLevel(ctx, k)
	}
}

// onDoorDue acts on the signals the front door queued, once they are due.
func (c *Controller) onDoorDue(ctx context.Context) {
	if k := c.core.Take(c.cfg.clock.Now()); k != 0 {
		c.actOnLevel(ctx, k)
	}
}

// actOnLevel acts on the signals k: a version signal fires VersionChanged
// when the version moved; anything else re-asserts the level. The door
// merges signals, so a version signal may carry a config change with it:
// VersionChanged does nothing in Disabled, and the config's level must still
// be acted on.
func (c *Controller) actOnLevel(ctx context.Context, k core.Signal) {
	moved := k&core.SignalVersion != 0 && c.onVersion(ctx)
	if !moved || k&^core.SignalVersion != 0 {
		// updateCh may fire without a version change: the re-assert writes
		// only if something (e.g. an image) really changed.
		c.reassert(ctx)
	}
	c.core.Acted(c.cfg.clock.Now())
}

// onVersion reads the version and fires VersionChanged when it moved; it
// reports whether it did.
func (c *Controller) onVersion(ctx context.Context) bool {
	v := c.cfg.versions.Version()
	if v == c.known.version {
		return false
	}
	from := c.known.version
	c.known.version = v
	if c.machine.State() != fsm.StateUpgrading {
		c.known.upgradeFrom = from // an upgrade overtaken by another still started from here
	}
	c.fire(ctx, fsm.VersionChanged{From: from, To: v})
	return true
}

package runtimeextractor

import (
	"context"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/core"
)

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

// reassert fires the level. While another's change waits for the repair gate,
// an enabled level's apply is a repair the gate times; a disabled one acts at once.
func (c *Controller) reassert(ctx context.Context) { c.fire(ctx, c.level()) }

// holding: the notifier has rejected the configuration and has seen no good one since this process started, so the
// admin's choice is unknown: the controller changes nothing and only reports the error until a valid config (or the
// ConfigMap's removal, meaning the defaults) arrives.
func (c *Controller) holding() bool {
	return !hasGoodConfig(c.config)
}

// actOnLevel: the door merges signals, so a version signal may carry a config
// change; VersionChanged does nothing in Disabled, so the level must still
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

// onVersion fires VersionChanged if the version moved, and reports whether it did.
func (c *Controller) onVersion(ctx context.Context) bool {
	v := c.cfg.versions.Version()
	from, moved := c.core.SeeVersion(v, c.machine.State() == fsm.StateUpgrading)
	if moved {
		c.fire(ctx, fsm.VersionChanged{From: from, To: v})
	}
	return moved
}

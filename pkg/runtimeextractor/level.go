package runtimeextractor

import "github.com/insights-runtime-extractor/controller/fsm"

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

// holding: the notifier has rejected the configuration and has seen no good one since this process started, so the
// admin's choice is unknown: the controller changes nothing and only reports the error until a valid config (or the
// ConfigMap's removal, meaning the defaults) arrives.
func (c *Controller) holding() bool {
	return !hasGoodConfig(c.config)
}

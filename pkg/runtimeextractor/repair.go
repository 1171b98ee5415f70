package runtimeextractor

import (
	"time"

	"github.com/openshift/library-go/pkg/config/clusteroperator/v1helpers"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// drifted counts a drain's drift and logs what was done about it, after the repair's write: act
// first, report after.
func (c *Controller) drifted(d core.Drain, wait time.Duration) {
	for _, k := range d.Kinds {
		c.cfg.metrics.ObserveDrift(string(k))
	}
	switch {
	case len(d.Kinds) == 0:
	case wait > 0:
		klog.Infof("DaemonSet %s/%s was %s; repairing it in %s (repair gate: %s)",
			resources.Namespace, resources.DaemonSetName, core.Summary(d.Kinds, d.Edits, d.Unnamed),
			wait.Round(time.Millisecond), c.backoffNote())
	default:
		klog.Infof("DaemonSet %s/%s was %s; acted on it, now %s",
			resources.Namespace, resources.DaemonSetName, core.Summary(d.Kinds, d.Edits, d.Unnamed), c.machine.State())
	}
}

// fightStarted reports a writer in a tug-of-war: log, Warning Event, gauge.
func (c *Controller) fightStarted() {
	msg := v1helpers.FindStatusCondition(status.Conditions(c.snapshot()), status.ConditionDegraded).Message
	if fight := c.conflict(); fight != nil {
		msg += "; " + fight.Tally()
	}
	klog.Warningf("tug-of-war over DaemonSet %s/%s: %s", resources.Namespace, resources.DaemonSetName, msg)
	ds, _ := c.informer.current()
	c.events.warn(ds, ReasonConflictingWriter, msg)
	c.cfg.metrics.SetConflictingWriter(true)
}

package runtimeextractor

import (
	"context"
	"time"

	"github.com/insights-runtime-extractor/controller/pkg/core"
)

// Run only receives; handle feeds what woke it to the core (step), so the convergence model,
// driving step on a fake clock, checks the loop that ships.

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

// inputs are the core's inputs for the wake-ups; the diagnoses are the rollout watch's own.
var inputs = map[wake]core.Input{
	wakeConfig:    {Kind: core.InputSignal, Signal: core.SignalConfig},
	wakeVersion:   {Kind: core.InputSignal, Signal: core.SignalVersion},
	wakeTLS:       {Kind: core.InputSignal, Signal: core.SignalTLS},
	wakeDrift:     {Kind: core.InputDrift},
	wakeDriftHint: {Kind: core.InputDrift, Hint: true},
	wakeRollout:   {Kind: core.InputRollout},
	wakeResync:    {Kind: core.InputReassert},
	wakeAlarm:     {Kind: core.InputAlarm},
}

func (c *Controller) handle(ctx context.Context, w wake, payload any) {
	switch w {
	case wakeDiagnosis:
		if r, ok := payload.(stuckResult); ok && c.rollouts.accept(r) {
			c.stuckChanged()
		}
	case wakeNodesNamed:
		if r, ok := payload.(namedResult); ok {
			c.rollouts.acceptNames(r)
		}
	default:
		c.step(ctx, inputs[w])
		return
	}
	c.step(ctx, core.Input{Kind: core.InputSettle})
}

// loopInputs are the channels Run makes for itself; the model passes its own.
type loopInputs struct {
	config, version <-chan struct{}
	resync          <-chan time.Time
}

func (c *Controller) tlsChanged() <-chan struct{} {
	if c.cfg.tls == nil {
		return nil
	}
	return c.cfg.tls.Changed()
}

// receive waits for the loop's next input; which ready one does not matter: each wake-up first feeds the queued drift.
func (c *Controller) receive(ctx context.Context, in loopInputs) (wake, any, bool) {
	select {
	case <-ctx.Done():
		return 0, nil, false
	case <-c.informer.ResourceModified():
		return wakeDrift, nil, true
	case <-in.config:
		return wakeConfig, nil, true
	case <-in.version:
		return wakeVersion, nil, true
	case <-c.cfg.versions.Changed():
		return wakeVersion, nil, true
	case <-c.tlsChanged():
		return wakeTLS, nil, true
	case <-c.hints:
		return wakeDriftHint, nil, true
	case <-c.informer.rollout:
		return wakeRollout, nil, true
	case <-in.resync:
		return wakeResync, nil, true
	case <-c.alarm.C():
		return wakeAlarm, nil, true
	case r := <-c.rollouts.result:
		return wakeDiagnosis, r, true
	case r := <-c.rollouts.named:
		return wakeNodesNamed, r, true
	}
}

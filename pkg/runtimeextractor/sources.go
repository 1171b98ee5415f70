package runtimeextractor

import (
	"context"
	"time"
)

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

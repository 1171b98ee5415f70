package runtimeextractor

import (
	"context"
	"slices"
	"time"
)

// loopSource is one input of the loop, as the model sees it.
type loopSource struct {
	wake    wake
	rank    int // lower ranks are taken first when several are ready
	pending func() bool
	take    func() (any, bool) // without waiting; false when nothing waits
	// result: the channel carries a read made off the loop. The model has no
	// API latency to time such reads by, so it leaves these sources out.
	result bool
}

const (
	// Drift goes first: its repair's latency is what an admin sees, and the
	// rollout wake-up that comes with every change of the DaemonSet can wait.
	rankDrift = iota
	rankOther
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

// receive waits for the loop's next input. A select chooses at random among
// ready cases, so ready drift (rankDrift) is taken first, as the model's pick
// does. Its cases are loopSources' rows.
func (c *Controller) receive(ctx context.Context, in loopInputs) (wake, any, bool) {
	if ctx.Err() != nil {
		return 0, nil, false
	}
	for _, s := range c.loopSources(in) {
		if s.rank == rankDrift {
			if v, ok := s.take(); ok {
				return s.wake, v, true
			}
		}
	}
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
	case <-c.own.hints:
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

// loopSources is what receive selects on, ctx.Done aside, as the parts are now
// (the alarm's channel changes when it is re-armed).
func (c *Controller) loopSources(in loopInputs) []loopSource {
	return []loopSource{
		source(wakeConfig, rankOther, in.config),
		source(wakeVersion, rankOther, in.version),
		source(wakeVersion, rankOther, c.cfg.versions.Changed()),
		source(wakeTLS, rankOther, c.tlsChanged()),
		source(wakeDrift, rankDrift, c.informer.ResourceModified()),
		source(wakeDriftHint, rankOther, c.own.hints),
		source(wakeRollout, rankOther, c.informer.rollout),
		source(wakeResync, rankOther, in.resync),
		source(wakeAlarm, rankOther, c.alarm.C()),
		resultOf(wakeDiagnosis, c.rollouts.result),
		resultOf(wakeNodesNamed, c.rollouts.named),
	}
}

func source[T any](w wake, rank int, ch <-chan T) loopSource {
	return loopSource{wake: w, rank: rank,
		pending: func() bool { return len(ch) > 0 },
		take: func() (any, bool) {
			select {
			case v, ok := <-ch:
				return v, ok
			default:
				return nil, false
			}
		}}
}

func resultOf[T any](w wake, ch <-chan T) loopSource {
	s := source(w, rankOther, ch)
	s.result = true
	return s
}

// pick takes the lowest ready rank, and among equals choose(n) of the n: the
// model's seed stands in for the Go runtime's choice in Run.
func pick(ready []loopSource, choose func(n int) int) loopSource {
	best := slices.MinFunc(ready, func(a, b loopSource) int { return a.rank - b.rank }).rank
	var equal []loopSource
	for _, s := range ready {
		if s.rank == best {
			equal = append(equal, s)
		}
	}
	return equal[choose(len(equal))]
}

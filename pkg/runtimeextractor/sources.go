package runtimeextractor

import (
	"context"
	"slices"
	"time"
)

// The loop's inputs. Run receives them in one typed select (receive), the
// first rank first; the convergence model takes the same channels from
// loopSources and chooses among the ready ones by pick, the same rule.

// loopSource is one input of the loop, as the model sees it: the wake it
// means, its rank (lower ranks are taken first when several are ready), and
// its channel's readiness and receive.
type loopSource struct {
	wake wake
	rank int
	// pending reports whether a value waits; take receives it without
	// waiting (false when none does). A nil channel is never pending.
	pending func() bool
	take    func() (any, bool)
	// result: the channel carries the result of a read made off the loop
	// (a stuck rollout's diagnosis, the unavailable nodes' names). The
	// convergence model has no API latency to time those reads by, so it
	// leaves these sources out; their handlers have tests of their own.
	result bool
}

const (
	// rankDrift: a pending drift goes first. Its repair's latency is what an
	// admin sees, and the rollout wake-up that comes with every change of
	// the DaemonSet can wait for it.
	rankDrift = iota
	rankOther
)

// loopInputs are the channels Run makes for itself: the relays that drain
// the host's config and version channels, and the resync ticker. The model
// passes its own.
type loopInputs struct {
	config, version <-chan struct{}
	resync          <-chan time.Time
}

// tlsChanged is the TLS profile's notification channel, nil (never ready)
// without a profile source.
func (c *Controller) tlsChanged() <-chan struct{} {
	if c.cfg.tls == nil {
		return nil
	}
	return c.cfg.tls.Changed()
}

// receive waits for the loop's next input. A ready source of the first rank
// (drift) is taken before anything else that is ready, by the rank
// loopSources gives it, as the model's pick does: the Go runtime chooses at
// random among the ready cases of one select. It reports false once ctx is
// done. Its cases are loopSources' rows.
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

// loopSources is the table of what receive selects on, as the parts are now
// (the alarm's channel changes when it is re-armed), ctx.Done aside.
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

// pick chooses among ready sources: the lowest rank, and among those,
// choose(n) of the n. Run's choice among equals is the Go runtime's; the
// model's is its seed's.
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

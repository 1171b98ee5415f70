package runtimeextractor

import (
	"context"
	"reflect"
	"slices"
	"time"
)

// The loop's scheduler: one table of what Run receives from, and one rule for
// which ready source goes first. Run and the convergence model both take
// their sources from loopSources and their choice from pick, so the model
// checks the order that ships.

// loopSource is one input of Run's select: the channel, the wake it means,
// and its rank (lower ranks are taken first when several are ready).
type loopSource struct {
	wake wake
	rank int
	ch   reflect.Value // a receive channel; a nil channel is never ready
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

// loopSources is the table of everything Run receives from, as the parts are
// now (the alarm's channel changes when it is re-armed), ctx.Done aside.
func (c *Controller) loopSources(in loopInputs) []loopSource {
	var tlsChanged <-chan struct{}
	if c.cfg.tls != nil {
		tlsChanged = c.cfg.tls.Changed()
	}
	return []loopSource{
		source(wakeConfig, rankOther, in.config),
		source(wakeVersion, rankOther, in.version),
		source(wakeVersion, rankOther, c.cfg.versions.Changed()),
		source(wakeTLS, rankOther, tlsChanged),
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
	return loopSource{wake: w, rank: rank, ch: reflect.ValueOf(ch)}
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

// receive waits for the next source by pick's rule: a rank's ready sources
// are tried, without waiting, before any of a higher rank; when none is
// ready, it waits for whichever is first. It reports false once ctx is done.
func receive(ctx context.Context, table []loopSource) (loopSource, any, bool) {
	if ctx.Err() != nil {
		return loopSource{}, nil, false
	}
	ranks := make([]int, 0, 2)
	for _, s := range table {
		ranks = append(ranks, s.rank)
	}
	slices.Sort(ranks)
	ranks = slices.Compact(ranks)
	for _, rank := range ranks[:len(ranks)-1] {
		var of []loopSource
		for _, s := range table {
			if s.rank == rank {
				of = append(of, s)
			}
		}
		if src, v, ok := selectFrom(ctx, of, false); ok {
			return src, v, true
		}
	}
	return selectFrom(ctx, table, true)
}

// selectFrom receives from one of sources, waiting when block is set (until
// ctx is done) and not otherwise.
func selectFrom(ctx context.Context, sources []loopSource, block bool) (loopSource, any, bool) {
	cases := make([]reflect.SelectCase, 0, len(sources)+1)
	for _, s := range sources {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: s.ch})
	}
	last := reflect.SelectCase{Dir: reflect.SelectDefault}
	if block {
		last = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
	}
	chosen, v, _ := reflect.Select(append(cases, last))
	if chosen == len(sources) {
		return loopSource{}, nil, false
	}
	return sources[chosen], v.Interface(), true
}

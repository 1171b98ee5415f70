package runtimeextractor

import (
	"context"
	"testing"
	"time"
)

// wakeNames name the wake-ups in the model's stories and failures; the loop that ships logs none.
var wakeNames = [...]string{
	wakeConfig: "config changed", wakeVersion: "version changed", wakeTLS: "TLS profile changed",
	wakeDrift: "resource modified", wakeDriftHint: "caller's drift hint", wakeRollout: "rollout",
	wakeResync: "resync timer", wakeAlarm: "deadline", wakeDiagnosis: "stuck diagnosis",
	wakeNodesNamed: "unavailable nodes named",
}

func (w wake) String() string { return wakeNames[w] }

// loopSource is one case of Run's receive, as the model sees it.
type loopSource struct {
	wake    wake
	pending func() bool
	take    func() (any, bool) // without waiting; false when nothing waits
	// result: the channel carries a read made off the loop. The model has no
	// API latency to time such reads by, so it leaves these sources out.
	result bool
}

// loopSources are receive's cases, ctx.Done aside, in its order, as the
// parts are now (the alarm's channel changes when it is re-armed).
// TestReceiveTakesEachLoopSource holds the two together.
func loopSources(c *Controller, in loopInputs) []loopSource {
	return []loopSource{
		source(wakeDrift, c.informer.ResourceModified()),
		source(wakeConfig, in.config),
		source(wakeVersion, in.version),
		source(wakeVersion, c.cfg.versions.Changed()),
		source(wakeTLS, c.tlsChanged()),
		source(wakeDriftHint, c.hints),
		source(wakeRollout, c.informer.rollout),
		source(wakeResync, in.resync),
		source(wakeAlarm, c.alarm.C()),
		resultOf(wakeDiagnosis, c.rollouts.result),
		resultOf(wakeNodesNamed, c.rollouts.named),
	}
}

func source[T any](w wake, ch <-chan T) loopSource {
	return loopSource{wake: w,
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
	s := source(w, ch)
	s.result = true
	return s
}

// pick is the Go runtime's choice among a select's ready cases: choose(n)
// of the n, the model's seed or its first.
func pick(ready []loopSource, choose func(n int) int) loopSource {
	return ready[choose(len(ready))]
}

// TestReceiveTakesEachLoopSource: every wake has a case in receive and a row
// in loopSources, and the two agree: with one input ready, the table shows
// that one pending and receive takes it.
func TestReceiveTakesEachLoopSource(t *testing.T) {
	s := newScriptedSim(t, true)
	tls, hints := newSettableTLS(nil, nil), make(chan struct{}, 1)
	s.c.cfg.tls, s.c.hints = tls, hints
	config, version, resync := make(chan struct{}, 1), make(chan struct{}, 1), make(chan time.Time, 1)
	in := loopInputs{config: config, version: version, resync: resync}
	send := []struct {
		wake wake
		make func()
	}{
		{wakeDrift, func() { notify(s.ri.modified) }},
		{wakeConfig, func() { config <- struct{}{} }},
		{wakeVersion, func() { version <- struct{}{} }},
		{wakeVersion, func() { s.ver.set("4.99.0") }},
		{wakeTLS, func() { tls.set(modernProfile, nil) }},
		{wakeDriftHint, func() { hints <- struct{}{} }},
		{wakeRollout, func() { notify(s.ri.rollout) }},
		{wakeResync, func() { resync <- time.Time{} }},
		{wakeAlarm, func() { s.c.alarm.follow(s.clock.Now(), true); s.clock.SetTime(s.clock.Now()) }},
		{wakeDiagnosis, func() { s.c.rollouts.result <- stuckResult{} }},
		{wakeNodesNamed, func() { s.c.rollouts.named <- namedResult{} }},
	}
	covered := map[wake]bool{}
	for i, tc := range send {
		drainSources(s.c, in)
		tc.make()
		var pending []wake
		for _, src := range loopSources(s.c, in) {
			if src.pending() {
				pending = append(pending, src.wake)
			}
		}
		if len(pending) != 1 || pending[0] != tc.wake {
			t.Errorf("#%d %s: the table's pending sources are %v", i, tc.wake, pending)
		}
		// Bounded: a receive without this case would wait for ever.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if w, _, ok := s.c.receive(ctx, in); !ok || w != tc.wake {
			t.Errorf("#%d: receive took %s (ok %v), want %s", i, w, ok, tc.wake)
		}
		cancel()
		covered[tc.wake] = true
	}
	for w := wakeConfig; w <= wakeNodesNamed; w++ {
		if w.String() == "" || !covered[w] {
			t.Errorf("wake %d (%q) is not covered", w, w)
		}
	}
}

func TestReceiveWaitsAndEndsWithTheContext(t *testing.T) {
	s := newScriptedSim(t, true)
	drainSources(s.c, loopInputs{})
	go func() { s.c.rollouts.result <- stuckResult{} }()
	if w, payload, ok := s.c.receive(context.Background(), loopInputs{}); !ok || w != wakeDiagnosis || payload == nil {
		t.Fatalf("receive = %s, %v, %v; want the diagnosis with its payload", w, payload, ok)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	if w, _, ok := s.c.receive(ctx, loopInputs{}); ok {
		t.Fatalf("receive took %s after the context ended", w)
	}
}

// drainSources takes whatever waits on c's inputs, so that a test's own
// notifications are all that is ready.
func drainSources(c *Controller, in loopInputs) {
	for _, src := range loopSources(c, in) {
		for src.pending() {
			src.take()
		}
	}
}

// TestEveryWakeFeedsQueuedDriftFirst: whatever input the loop takes, the
// drift the informer has queued reaches the core first, so that its repair is
// gated and counted, even before the informer's notification is taken.
func TestEveryWakeFeedsQueuedDriftFirst(t *testing.T) {
	for _, w := range []wake{wakeConfig, wakeVersion, wakeRollout, wakeResync} {
		t.Run(w.String(), func(t *testing.T) {
			s := newSettledSim(t)
			repairs := s.repairsCounted()
			s.deleteExternally()
			s.deliver(len(s.inFlight))
			<-s.ri.modified // taken by a receive that has yet to hand it to handle
			s.dispatch(w)
			if got := s.driftCounts()[DriftDeleted]; got != 1 {
				t.Errorf("drift_events_total{kind=deleted} = %v after the %s, want 1", got, w)
			}
			if s.stored() == nil || s.repairsCounted() != repairs+1 {
				t.Errorf("after the %s: DaemonSet present %v, repairs counted %v, want present and 1", w, s.stored() != nil, s.repairsCounted()-repairs)
			}
			s.report()
		})
	}
}

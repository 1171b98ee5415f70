package runtimeextractor

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestLoopSourcesCoverEveryWake: Run receives only through loopSources, so a
// wake that handle knows and the table lacks would never be delivered.
func TestLoopSourcesCoverEveryWake(t *testing.T) {
	s := newScriptedSim(t, true)
	table := s.c.loopSources(loopInputs{config: make(chan struct{}), version: make(chan struct{}), resync: make(chan time.Time)})
	for w := wakeConfig; w <= wakeNodesNamed; w++ {
		if w.String() == "" {
			t.Errorf("wake %d has no name", w)
		}
		if !slices.ContainsFunc(table, func(src loopSource) bool { return src.wake == w }) {
			t.Errorf("no source of Run's table wakes the loop for %s", w)
		}
	}
}

// readyTable is a table of buffered channels, each holding one value: every
// source is ready.
func readyTable() []loopSource {
	var table []loopSource
	for w := wakeConfig; w <= wakeNodesNamed; w++ {
		ch := make(chan struct{}, 1)
		ch <- struct{}{}
		rank := rankOther
		if w == wakeDrift {
			rank = rankDrift
		}
		table = append(table, source(w, rank, ch))
	}
	return table
}

func TestPickTakesDriftFirst(t *testing.T) {
	table := readyTable()
	for i := range len(table) {
		if got := pick(table, func(n int) int { return min(i, n-1) }); got.wake != wakeDrift {
			t.Errorf("pick chose %s with drift ready", got.wake)
		}
	}
	others := slices.DeleteFunc(readyTable(), func(src loopSource) bool { return src.wake == wakeDrift })
	seen := map[wake]bool{}
	for i := range len(others) {
		seen[pick(others, func(int) int { return i }).wake] = true
	}
	if len(seen) != len(others) {
		t.Errorf("among sources of one rank, pick reached %d of %d", len(seen), len(others))
	}
}

// TestReceiveTakesDriftFirst is pick's rule in Run's own receive: with
// drift and other inputs ready, drift goes first, every time (the Go runtime
// chooses at random among the cases of one select); then the others.
func TestReceiveTakesDriftFirst(t *testing.T) {
	s := newScriptedSim(t, true)
	config, resync := make(chan struct{}, 1), make(chan time.Time, 1)
	in := loopInputs{config: config, resync: resync}
	drainSources(s.c, in)
	for range 50 {
		config <- struct{}{}
		resync <- time.Time{}
		notify(s.ri.modified)
		if w, _, ok := s.c.receive(context.Background(), in); !ok || w != wakeDrift {
			t.Fatalf("receive took %s (ok %v) with drift ready", w, ok)
		}
		seen := map[wake]bool{}
		for range 2 {
			w, _, _ := s.c.receive(context.Background(), in)
			seen[w] = true
		}
		if !seen[wakeConfig] || !seen[wakeResync] {
			t.Fatalf("after the drift, receive took %v, want the config and the resync", seen)
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
	for _, src := range c.loopSources(in) {
		for src.pending() {
			src.take()
		}
	}
}

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

// TestReceiveTakesDriftFirst is pick's rule in Run's own receive: with every
// source ready, drift goes first, every time (the Go runtime chooses at
// random among the cases of one select).
func TestReceiveTakesDriftFirst(t *testing.T) {
	for range 50 {
		src, _, ok := receive(context.Background(), readyTable())
		if !ok || src.wake != wakeDrift {
			t.Fatalf("receive took %s (ok %v) with drift ready", src.wake, ok)
		}
	}
}

func TestReceiveWaitsAndEndsWithTheContext(t *testing.T) {
	ch := make(chan int)
	table := []loopSource{source(wakeDiagnosis, rankOther, (<-chan int)(ch)), source(wakeDrift, rankDrift, (<-chan struct{})(nil))}
	go func() { ch <- 7 }()
	src, payload, ok := receive(context.Background(), table)
	if !ok || src.wake != wakeDiagnosis || payload != 7 {
		t.Fatalf("receive = %s, %v, %v; want the diagnosis with its payload 7", src.wake, payload, ok)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	if src, _, ok := receive(ctx, table); ok {
		t.Fatalf("receive took %s after the context ended", src.wake)
	}
}

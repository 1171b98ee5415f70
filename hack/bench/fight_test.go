package main

import (
	"testing"
	"time"
)

// The schedule's allowance: the first repair at once, then after 1, 2, 4,
// ... seconds, capped at a minute.
func TestRepairsAllowed(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{0, 1}, {time.Second, 2}, {2 * time.Second, 2}, {3 * time.Second, 3}, {7 * time.Second, 4},
		{63 * time.Second, 7}, {2 * time.Minute, 7}, {123 * time.Second, 8}, {5 * time.Minute, 10},
	} {
		if got := repairsAllowed(tc.d); got != tc.want {
			t.Errorf("repairsAllowed(%s) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

// Package testwait says how long a unit test waits for something that should
// happen promptly (an informer's event, a signal, a goroutine's return).
//
// CI runs the unit packages, and the race detector over them, under nice
// beside the end-to-end suite, whose clusters take the cores first; a waiting
// test may then get a sliver of a core for minutes. A passing test never
// waits this long, so the figure only bounds how long a failing one takes to
// say so. It is no timer of the controller: those run at their defaults.
package testwait

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Patience is the longest a unit test polls or selects for an outcome before
// it fails.
const Patience = 2 * time.Minute

// For polls cond until it holds, for up to Patience; then the test fails,
// naming what it waited for.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, Patience, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

package runtimeextractor

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// failUntil steps the core's retry as the loop does: each attempt fails until
// clears (never when zero), and the next one comes when its timer is due.
// It returns, per attempt, when it was made and whether the failures
// persisted after it.
func failUntil(t *testing.T, err error, clears, horizon time.Duration) (at []time.Duration, persisted []bool) {
	t.Helper()
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	now := t0
	s := core.New(DefaultRepairPolicy(), DefaultDegradedInertia)
	limiter := defaultRateLimiter()
	for now.Sub(t0) <= horizon {
		fail := clears == 0 || now.Sub(t0) < clears
		outcome := core.Result{Outcome: core.ApplyUnchanged}
		if fail {
			outcome = core.Result{Outcome: core.ApplyFailed, Err: err, OwnInput: ownInput(err)}
		}
		s.Step(core.Input{Kind: core.InputApplied, Result: outcome}, now)
		at = append(at, now.Sub(t0))
		persisted = append(persisted, s.Persists(now))
		if !fail {
			return at, persisted
		}
		s.Step(core.Input{Kind: core.InputBackoff, Backoff: limiter.When(retryKey)}, now)
		now, _ = s.At(core.PartRetry)
	}
	return at, persisted
}

// A refusal that ends within the inertia never persists, whatever the
// backoff did meanwhile.
func TestFailuresThatClearWithinTheInertiaNeverPersist(t *testing.T) {
	refused := errors.New(`admission webhook "policy" denied the request`)
	for _, clears := range []time.Duration{time.Second, 10 * time.Second, DefaultDegradedInertia - time.Millisecond} {
		at, persisted := failUntil(t, refused, clears, time.Hour)
		for i, p := range persisted {
			if p {
				t.Fatalf("clearing after %s: the failures persisted at attempt %d (%s)", clears, i+1, at[i])
			}
		}
	}
}

// A refusal that lasts persists on the attempt made when the inertia ends,
// not at the backoff's next step after it, and not before.
func TestFailuresPersistAtTheInertia(t *testing.T) {
	at, persisted := failUntil(t, errors.New("forbidden"), 0, DefaultDegradedInertia+time.Minute)
	first := -1
	for i, p := range persisted {
		if p {
			first = i
			break
		}
	}
	if first < 0 {
		t.Fatalf("the failures never persisted in %s: attempts at %v", DefaultDegradedInertia+time.Minute, at)
	}
	if at[first] != DefaultDegradedInertia {
		t.Errorf("the failures persisted at %s, want at the inertia %s (attempts at %v)", at[first], DefaultDegradedInertia, at)
	}
	t.Logf("%d attempts before the failures persisted at %s", first, at[first])
}

// What no retry can fix, the controller's own input, persists at once.
func TestUnfixableFailurePersistsAtOnce(t *testing.T) {
	_, err := resources.ImagesFromEnv(func(string) string { return "not a/valid::image" }, false)
	for _, err := range []error{
		fmt.Errorf("refusing to apply: %w", err),
		fmt.Errorf("refusing to apply: %w", resources.ErrImagesUnset),
	} {
		if _, persisted := failUntil(t, err, 0, 0); !persisted[0] {
			t.Errorf("%v: did not persist at the first failure", err)
		}
	}
}

package e2e

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// soakCyclesEnv turns TestSoakRandomKills on: the number of cycles to run.
const soakCyclesEnv = "SOAK_CYCLES"

const (
	// soakBound is how long a cycle may take to converge, from the kill.
	soakBound = 30 * time.Second
	// soakGiveUp is how long a cycle that missed soakBound is still waited
	// for, to tell a slow convergence (and how slow) from none.
	soakGiveUp = 5 * time.Minute
)

// TestSoakRandomKills runs the kill-at-random-point cycle of
// TestRandomKillsConverge SOAK_CYCLES times (`make soak`: 200) at the default
// settings, and reports every cycle that did not converge within 30 s after
// the kill, with the end of the killed and the restarted controller's logs
// (every transition, at -v 4). It ends with "soak: N/M converged". A cycle that
// has not converged 5 minutes after the kill stops the soak. The seed is new
// every run and logged; FAULT_SEED=<seed> replays it.
//
// It is not part of the suite (it takes about half an hour): without
// SOAK_CYCLES it skips, saying how to run it.
func TestSoakRandomKills(t *testing.T) {
	v := os.Getenv(soakCyclesEnv)
	if v == "" {
		t.Skipf("soak test, not part of the suite: run `make soak`, or %s=200 go test -timeout 4h -v -run '^TestSoakRandomKills$' ./test/e2e/", soakCyclesEnv)
	}
	cycles, err := strconv.Atoi(v)
	if err != nil || cycles < 1 {
		t.Fatalf("%s=%q: want a positive number of cycles", soakCyclesEnv, v)
	}
	seed := killSeed(t, uint64(time.Now().UnixNano()))
	e := newEnv(t)
	k := e.newKillCycler(seed)
	began := time.Now()
	var took []time.Duration
	var late []cycleResult
	converged := 0
	summary := func() {
		slices.Sort(took)
		if len(took) > 0 {
			t.Logf("convergence after the kill over %d cycles: p50 %s, p95 %s, max %s; %d late (over %s): %v",
				len(took), pct(took, 0.50), pct(took, 0.95), took[len(took)-1].Round(time.Millisecond), len(late), soakBound, runsOf(late))
		}
		t.Logf("soak took %s", time.Since(began).Round(time.Second))
		fmt.Printf("soak: %d/%d converged\n", converged, cycles)
	}
	for run := 1; run <= cycles; run++ {
		r := k.cycle(run, soakBound)
		if r.ok {
			converged++
			took = append(took, r.took)
			t.Logf("%s", r)
			continue
		}
		// Late: report it with the logs as they are now, then find out
		// whether and when it converges.
		logs := r.logs()
		r.ok = k.waitConverged(soakGiveUp - soakBound)
		r.took = time.Since(r.killedAt)
		late = append(late, r)
		if !r.ok {
			t.Errorf("%s: not converged within %s; at %s:\n%s", r, soakBound, soakBound, logs)
			summary()
			t.Fatalf("run %d never converged; the soak stops (transitions since: %s)", run, tail(r.restarted.Log, 20))
		}
		took = append(took, r.took)
		t.Errorf("%s: not within %s; the logs at %s:\n%s", r, soakBound, soakBound, logs)
	}
	k.staysConverged(3 * time.Second)
	summary()
}

// pct is the nearest-rank percentile of sorted durations, to the millisecond.
func pct(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(float64(len(sorted))*p)) - 1
	return sorted[max(0, min(i, len(sorted)-1))].Round(time.Millisecond)
}

func runsOf(rs []cycleResult) []int {
	var out []int
	for _, r := range rs {
		out = append(out, r.run)
	}
	return out
}

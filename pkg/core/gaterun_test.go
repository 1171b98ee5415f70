package core

import (
	"fmt"
	"testing"
	"time"

	"github.com/insights-runtime-extractor/controller/fsm"
)

// gateRun plays the repair gate as the control loop drives it, on a fake
// clock: each change by someone else is described and reported to the gate,
// repaired at once unless the gate defers it, and the gate's timer is
// followed after every step.
type gateRun struct {
	s       *State
	now     time.Time
	t0      time.Time
	repairs []time.Duration // when the controller repaired, since the start
}

func newGateRun() *gateRun {
	t0 := time.Unix(1_000_000, 0)
	return &gateRun{s: New(DefaultPolicy(), time.Minute), now: t0, t0: t0}
}

func (r *gateRun) repair() {
	r.s.wrote(Write{Allowed: true, Repair: true}, ApplyChanged, r.now)
	r.repairs = append(r.repairs, r.now.Sub(r.t0))
}

// advance runs the gate's timer up to (and including) t.
func (r *gateRun) advance(t time.Duration) {
	for {
		r.s.followGate(r.now)
		at, armed := r.s.At(PartGate)
		if !armed || at.Sub(r.t0) > t {
			r.now = r.t0.Add(t)
			return
		}
		r.now = at
		for _, e := range r.s.decide(Input{Kind: InputDeadline, Part: PartGate, DueAt: at, Level: fsm.Enabled{}}, at) {
			if e.Kind == effectRepair {
				r.repair()
			}
		}
	}
}

// change is a change at t by manager ("": one managedFields does not name).
func (r *gateRun) change(t time.Duration, manager string) {
	d := Drain{Kinds: []DriftKind{DriftModified}, Unnamed: manager == ""}
	if manager != "" {
		d.Edits = []Edit{{Manager: manager, Operation: "Update", Time: r.t0.Add(t)}}
	}
	r.changeBy(t, d)
}

// unrecorded is a change at t by manager that its managedFields entry does
// not record (a second write within the same second): manager is only the
// object's newest other manager.
func (r *gateRun) unrecorded(t time.Duration, manager string) {
	r.changeBy(t, Drain{Kinds: []DriftKind{DriftModified}, Unnamed: true, Likely: []string{manager}})
}

func (r *gateRun) changeBy(t time.Duration, d Drain) {
	r.advance(t)
	for _, e := range r.s.decide(Input{Kind: InputDrained, drift: Drift{Drain: d, Hint: true, Present: true, Enabled: true}}, r.now) {
		if e.Kind == effectRepair {
			r.repair()
		}
	}
}

// storm is a change by manager every step from from until to (excluded);
// it returns the last one's time.
func (r *gateRun) storm(from, to, step time.Duration, manager string) (last time.Duration) {
	for at := from; at < to; at += step {
		r.change(at, manager)
		last = at
	}
	return last
}

// undoneAfter is how long after t the first repair at or after t came; -1
// when none did.
func (r *gateRun) undoneAfter(t time.Duration) time.Duration {
	for _, at := range r.repairs {
		if at >= t {
			return at - t
		}
	}
	return -1
}

// A user's few edits, a label removal by another client, and about 50 s
// later a burst by a third client (issue 26, defect 8): the burst is another
// writer's first, and has undone no repair, so it is repaired as if alone,
// its last change within seconds of its end, not after the backoff the
// earlier writers' streak had reached.
func TestAnotherWritersFirstBurstIsRepairedSoon(t *testing.T) {
	r := newGateRun()
	for _, at := range []time.Duration{0, 500 * time.Millisecond, time.Second} {
		r.change(at, "kubectl-set")
	}
	r.change(5*time.Second, "")
	const burstStart, burstEnd = 55 * time.Second, 60 * time.Second
	last := r.storm(burstStart, burstEnd, 50*time.Millisecond, "kubectl-patch")
	r.advance(2 * time.Minute)
	alone := newGateRun()
	alone.storm(0, burstEnd-burstStart, 50*time.Millisecond, "kubectl-patch")
	alone.advance(time.Minute)
	want := alone.undoneAfter(last - burstStart)
	got := r.undoneAfter(last)
	t.Logf("the burst's last change undone %s after it (alone: %s); repairs at %v", got, want, r.repairs)
	if got < 0 || got > want {
		t.Errorf("the burst's last change was undone %s after it, want %s as when the burst is alone", got, want)
	}
}

// One writer that undoes every repair, every 2 s for 5 minutes: the
// repairs stay within the budget's bound over the fight (11 for 5 minutes,
// against 150 changes), the fight is declared, and it ends once the
// writer stopped.
func TestGateBoundsAFightWithOneWriter(t *testing.T) {
	r := newGateRun()
	declared := false
	for at := time.Duration(0); at < 5*time.Minute; at += 2 * time.Second {
		r.change(at, "gitops-fight")
		declared = declared || r.s.Fighting()
	}
	r.advance(10 * time.Minute)
	p := DefaultPolicy()
	if n, bound := len(r.repairs), p.Bound(r.repairs[len(r.repairs)-1]-r.repairs[0]); n > bound {
		t.Errorf("%d repairs of 150 changes in a 5-minute fight, want at most %d: %v", n, bound, r.repairs)
	}
	if !declared {
		t.Error("the fight was never declared")
	}
	if r.s.Fighting() {
		t.Errorf("the fight is still on 5 minutes after the writer stopped")
	}
}

// Issue 33, defect 3: a writer that undoes repairs at 0, 1, 3, 7 and 15 s,
// pauses 61 s, and starts again, three times over. Its repairs stay within
// the budget and it is reported as a fight, which lasts through its pauses.
func TestBurstAndPauseIsBoundedAndReported(t *testing.T) {
	r := newGateRun()
	var first time.Duration = -1
	cycle := 15*time.Second + 61*time.Second
	for c := range 3 {
		for _, at := range []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second} {
			t0 := time.Duration(c)*cycle + at
			r.change(t0, "burster")
			if r.s.Fighting() && first < 0 {
				first = t0
			}
			if first >= 0 && !r.s.Fighting() {
				t.Fatalf("the fight declared at %s cleared by %s, during the writer's pauses", first, t0)
			}
		}
	}
	r.advance(3*cycle + time.Minute)
	if first < 0 {
		t.Fatal("burst and pause was never reported as a fight")
	}
	p := DefaultPolicy()
	if n, bound := len(r.repairs), p.Bound(r.repairs[len(r.repairs)-1]-r.repairs[0]); n > bound {
		t.Errorf("%d repairs, the budget allows %d: %v", n, bound, r.repairs)
	}
	t.Logf("fight declared at %s; repairs at %v", first, r.repairs)
}

// Issue 33: a 20 s storm by kubectl patch a minute after earlier kubectl
// patch edits is undone within 5 s of its end (the streak schedule put the
// repair 31 s after the storm's start).
func TestStormAfterEarlierEditsIsUndoneWithin5s(t *testing.T) {
	r := newGateRun()
	r.change(0, "kubectl-patch")
	r.change(10*time.Second, "kubectl-patch")
	last := r.storm(70*time.Second, 90*time.Second, 200*time.Millisecond, "kubectl-patch")
	r.advance(3 * time.Minute)
	if got := r.undoneAfter(last); got < 0 || got > 5*time.Second {
		t.Errorf("the storm's last change was undone %s after it, want within 5s; repairs at %v", got, r.repairs)
	}
}

// Issue 33, defects 2 and 4: one drain that names many new writers is one
// repair and draws one from the budget, not one streak's worth per name; and
// the description of a waiting repair names a bounded set of writers,
// however many churn through while it waits.
func TestDrainWithManyNamesIsOneRepair(t *testing.T) {
	r := newGateRun()
	var writers []Edit
	for i := range 50 {
		writers = append(writers, Edit{Manager: fmt.Sprintf("churn-%d", i), Operation: "Update", Time: r.t0})
	}
	r.changeBy(0, Drain{Kinds: []DriftKind{DriftModified}, Edits: writers})
	named := 0          // the most writers the pending repair named while it waited (defect 4)
	for i := range 50 { // and then each of them again, 100 ms apart
		r.change(time.Duration(i+1)*100*time.Millisecond, fmt.Sprintf("churn-%d", i))
		named = max(named, len(r.s.NextRepair().Edits))
	}
	r.advance(2 * time.Minute)
	if n, bound := len(r.repairs), DefaultPolicy().Bound(2*time.Minute); n > bound {
		t.Errorf("%d repairs in 2 minutes, the budget allows %d: %v", n, bound, r.repairs)
	}
	if named > MaxNamedWriters {
		t.Errorf("the pending repair named %d writers while it waited, want at most %d", named, MaxNamedWriters)
	}
	if n := len(r.s.Log().Writers()); n > MaxNamedWriters+2 {
		t.Errorf("the gate keeps %d writers", n)
	}
}

// A storm by one writer at 20 writes a second: the API server keeps
// managedFields times to the second, so only the first write of each second
// names the writer, and the others change nothing it records. They are the
// same writer's: repaired as when each is named.
func TestStormNamedOnceASecondIsOneWriter(t *testing.T) {
	named, partly := newGateRun(), newGateRun()
	for at := time.Duration(0); at < 5*time.Second; at += 50 * time.Millisecond {
		named.change(at, "e2e.test")
		if at%time.Second == 0 {
			partly.change(at, "e2e.test")
		} else {
			partly.unrecorded(at, "e2e.test")
		}
	}
	named.advance(time.Minute)
	partly.advance(time.Minute)
	if fmt.Sprint(partly.repairs) != fmt.Sprint(named.repairs) {
		t.Errorf("repairs at %v, want %v as when every write is named", partly.repairs, named.repairs)
	}
	t.Logf("repairs at %v", partly.repairs)
}

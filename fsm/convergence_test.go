package fsm

import (
	"errors"
	"fmt"
	"math/rand"
	"testing"
)

// simCluster is the smallest model of the cluster the machine drives: the config,
// the target version, one DaemonSet and an API that can fail.
type simCluster struct {
	enabled   bool
	version   int
	present   bool
	dsVersion int
	correct   bool // spec as desired (no drift)
	gen       int64
	rolledOut bool
	failing   bool
}

// sim plays the executor: it carries out each action against simCluster and feeds
// the outcome back, exactly as the controller's executor does, including the
// post-apply rollout check from the cache.
type sim struct {
	t            *testing.T
	c            simCluster
	m            *Machine
	retryPending bool
	log          []string
}

func (s *sim) level() Event {
	if s.c.enabled {
		return Enabled{}
	}
	return Disabled{}
}

func (s *sim) fire(ev Event) {
	for ev != nil {
		tr, err := s.m.Fire(ev)
		if err != nil {
			s.t.Fatalf("Fire: %v\n%v", err, s.log)
		}
		s.log = append(s.log, fmt.Sprintf("%s: %s -> %s/%s", Describe(ev), tr.From, tr.To, tr.Action))
		ev = s.execute(tr.Action)
	}
}

func (s *sim) execute(a Action) Event {
	c := &s.c
	switch a {
	case ActionApply:
		if c.failing {
			return ApplyFailed{Err: errors.New("injected")}
		}
		var out Event
		switch {
		case !c.present:
			c.present, c.gen, c.correct, c.dsVersion, c.rolledOut = true, 1, true, c.version, false
			out = Applied{Generation: c.gen}
		case !c.correct || c.dsVersion != c.version:
			c.gen++
			c.correct, c.dsVersion, c.rolledOut = true, c.version, false
			out = Applied{Generation: c.gen}
		default:
			out = AppliedUnchanged{Generation: c.gen}
		}
		if c.rolledOut {
			// The post-apply check: a no-op apply produces no watch event.
			s.fireAfter(out, RolloutComplete{Generation: c.gen})
			return nil
		}
		return out
	case ActionDelete:
		if !c.present {
			return DeleteDone{} // the cache shows nothing: no DELETE is sent
		}
		if c.failing {
			return DeleteFailed{Err: errors.New("injected")}
		}
		c.present = false
		return DeleteDone{}
	case ActionRetry:
		s.retryPending = true
	}
	return nil
}

func (s *sim) fireAfter(first, second Event) {
	s.fire(first)
	s.fire(second)
}

func (s *sim) perturb(r *rand.Rand) {
	c := &s.c
	switch r.Intn(11) {
	case 0: // config flip
		c.enabled = !c.enabled
		s.fire(s.level())
	case 1: // external delete
		if c.present {
			c.present = false
			s.fire(Deleted{})
		}
	case 2: // external spec change
		if c.present {
			c.gen++
			c.correct, c.rolledOut = false, false
			s.fire(Modified{Generation: c.gen})
		}
	case 3: // version bump
		c.version++
		s.fire(VersionChanged{From: fmt.Sprint(c.version - 1), To: fmt.Sprint(c.version)})
	case 4: // the DaemonSet controller finishes a rollout
		if c.present && !c.rolledOut {
			c.rolledOut = true
			s.fire(RolloutComplete{Generation: c.gen})
		}
	case 5:
		c.failing = !c.failing
	case 6: // a retry's backoff expires
		if s.retryPending {
			s.retryPending = false
			s.fire(s.level())
		}
	case 7: // periodic resync
		s.fire(s.level())
	case 8: // someone creates it (e.g. while disabled): an Add the controller did not write
		if !c.present {
			c.present, c.gen, c.correct, c.rolledOut = true, 1, false, false
			s.fire(Modified{Generation: c.gen})
		}
	case 9: // a change whose watch event is lost (resync must repair it)
		if c.present {
			c.gen++
			c.correct, c.rolledOut = false, false
		}
	case 10: // a stale rollout report for an older generation
		if c.gen > 1 {
			s.fire(RolloutComplete{Generation: c.gen - 1})
		}
	}
}

// quiet lets the world settle: the API heals, retries and resyncs run and the
// DaemonSet controller finishes whatever rollout is pending.
func (s *sim) quiet() {
	s.c.failing = false
	for i := 0; i < 5; i++ {
		if s.retryPending {
			s.retryPending = false
			s.fire(s.level())
		}
		s.fire(s.level())
		if s.c.present && !s.c.rolledOut {
			s.c.rolledOut = true
			s.fire(RolloutComplete{Generation: s.c.gen})
		}
	}
}

func (s *sim) converged() error {
	c, st := s.c, s.m.State()
	if c.enabled {
		if st != StateRunning || !c.present || !c.correct || c.dsVersion != c.version || !c.rolledOut {
			return fmt.Errorf("enabled: state %s, cluster %+v", st, c)
		}
		return nil
	}
	if st != StateDisabled || c.present {
		return fmt.Errorf("disabled: state %s, cluster %+v", st, c)
	}
	return nil
}

// TestRandomizedConvergence: random config flips, deletes, modifications, version
// bumps, rollouts, lost events and API failures, then quiet. Every run must end in
// Running with the right DaemonSet rolled out when enabled, and Disabled with
// nothing left when disabled.
func TestRandomizedConvergence(t *testing.T) {
	runs := 20000
	if testing.Short() {
		runs = 2000
	}
	for run := 0; run < runs; run++ {
		r := rand.New(rand.NewSource(int64(run)))
		s := &sim{t: t, m: New(StateDisabled)}
		s.c.enabled = r.Intn(2) == 0
		s.fire(s.level())
		for i, n := 0, r.Intn(40); i < n; i++ {
			s.perturb(r)
		}
		s.quiet()
		if err := s.converged(); err != nil {
			t.Fatalf("run %d (seed %d) did not converge: %v\nlast steps: %v", run, run, err, tail(s.log, 12))
		}
	}
}

func tail(l []string, n int) []string {
	if len(l) > n {
		return l[len(l)-n:]
	}
	return l
}

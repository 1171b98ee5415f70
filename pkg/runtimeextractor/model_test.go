package runtimeextractor

// The bounded exhaustive mode of the convergence model: every sequence of up
// to -model.depth outside events over a small alphabet, from the start of a
// controller that has just created the DaemonSet (its Added event still in
// flight, the create still expected). Sequences are explored breadth first;
// a sequence whose world and controller end in a state already seen is not
// extended (duplicate states pruned). Each new state is then settled and
// checked with the convergence test's invariants (propSim.settleAndCheck).

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

var modelDepth = flag.Int("model.depth", 5, "how long the sequences of TestModelExhaustive are")

// letter is one outside event of the exhaustive alphabet.
type letter struct {
	name string
	do   func(*propSim)
}

// alphabet holds the events the defects of testdata/model-reverts need: a
// restart, an addition by someone else with the annotations kept, an older
// owned version written back, a pod that stays unavailable, deletes refused,
// time passing, a controller that runs until it is quiet, and a short fight
// (another writer's 4 changes, 2 s apart). (The random runs have more:
// replacements, nodes dropping out, relists, partial deliveries.)
var alphabet = []letter{
	{"run", (*propSim).runToQuiet},
	{"restart", (*propSim).restart},
	{"flip config", (*propSim).flipConfig},
	{"invalid config", (*propSim).breakConfig},
	{"version bump", (*propSim).bumpVersion},
	{"sidecar added", func(s *propSim) { s.add(0) }},
	{"version annotation reverted", (*propSim).revertMetadata},
	{"pod unavailable", (*propSim).holdPod},
	{"deletes refused", func(s *propSim) { s.setRefused("delete", !s.refused["delete"]) }},
	{"time passes", (*propSim).timePasses},
	{"fight", func(s *propSim) { s.fight(4) }},
}

// modelRun is one sequence's outcome.
type modelRun struct {
	seq   []int
	state string // fingerprint after the sequence, "" when it stopped on a violation
	v     *violation
	story string
}

// TestModelExhaustive runs every sequence up to -model.depth (pruned by
// state) and reports how many it ran and how many distinct states they
// reached; each kind of violation is reported with its shortest sequence.
func TestModelExhaustive(t *testing.T) {
	quietKlog(t)
	start := time.Now()
	seen := map[string]bool{}
	frontier := [][]int{nil}
	ran := 0
	found := map[string]modelRun{}
	for depth := 1; depth <= *modelDepth; depth++ {
		var next [][]int
		var batch [][]int
		for _, prefix := range frontier {
			for l := range alphabet {
				batch = append(batch, append(slices.Clone(prefix), l))
			}
		}
		for _, r := range runModel(t, batch) {
			ran++
			if r.v != nil {
				if prev, ok := found[r.v.kind]; !ok || len(r.seq) < len(prev.seq) {
					found[r.v.kind] = r
				}
				continue
			}
			if r.state == "" || seen[r.state] {
				continue
			}
			seen[r.state] = true
			next = append(next, r.seq)
		}
		frontier = next
	}
	// Printed for make test's summary: the coverage of this run.
	fmt.Printf("model: depth %d, %d letters: %d sequences run, %d distinct states, %d violation kind(s), %s\n",
		*modelDepth, len(alphabet), ran, len(seen), len(found), time.Since(start).Round(time.Second))
	for _, kind := range slices.Sorted(maps.Keys(found)) {
		r := found[kind]
		t.Errorf("%s: shortest sequence [%s]: %s\n%s", kind, sequenceName(r.seq), r.v.msg, r.story)
	}
}

func sequenceName(seq []int) string {
	names := make([]string, len(seq))
	for i, l := range seq {
		names[i] = alphabet[l].name
	}
	return strings.Join(names, ", ")
}

// runModel runs the sequences on all cores; each one replays from the start
// on a simulator of its own, then settles and checks.
func runModel(t *testing.T, seqs [][]int) []modelRun {
	out := make([]modelRun, len(seqs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(seqs)); i = next.Add(1) - 1 {
				out[i] = runSequence(t, seqs[i])
			}
		}()
	}
	wg.Wait()
	for _, r := range out {
		if r.v != nil && r.v.kind == "aborted" {
			t.Fatalf("simulation aborted on [%s]: %s", sequenceName(r.seq), r.v.msg)
		}
	}
	return out
}

func runSequence(t testing.TB, seq []int) (r modelRun) {
	r.seq = seq
	defer func() {
		if p := recover(); p != nil {
			r.v = &violation{kind: "aborted", msg: fmt.Sprint(p)}
		}
	}()
	s := newPropSim(t, 0, func(msg string) { panic(msg) })
	defer s.close()
	s.start(true, initialNone)
	for _, l := range seq {
		s.stimulus()
		alphabet[l].do(s)
		if len(s.violations) > 0 {
			break
		}
	}
	if len(s.violations) == 0 {
		r.state = s.fingerprint()
		s.settleAndCheck()
	}
	if len(s.violations) > 0 {
		r.v, r.story, r.state = &s.violations[0], s.story(), ""
	}
	return r
}

// fingerprint names the simulated world and the controller's memory of it,
// with UIDs, versions and specs numbered in order of appearance, so that
// two sequences that reach the same situation by different routes match.
func (s *propSim) fingerprint() string {
	names := map[string]string{}
	name := func(kind, v string) string {
		if v == "" {
			return "-"
		}
		key := kind + ":" + v
		if n, ok := names[key]; ok {
			return n
		}
		n := fmt.Sprintf("%s%d", kind, len(names))
		names[key] = n
		return n
	}
	target := name("v", s.ver.Version())
	object := func(ds *appsv1.DaemonSet) string {
		if ds == nil {
			return "none"
		}
		spec, err := json.Marshal(ds.Spec)
		s.must(err)
		sum := sha256.Sum256(spec)
		meta := missingOwnedLabel(ds) + "|" + name("v", ds.Annotations[resources.VersionAnnotation])
		return fmt.Sprintf("%s spec=%s meta=%s status=%v deleting=%v", name("uid", string(ds.UID)),
			name("spec", hex.EncodeToString(sum[:8])), meta, !s.statusBehind(ds), ds.DeletionTimestamp != nil)
	}
	var b strings.Builder
	srv := s.stored()
	cached, _ := s.cached()
	viewed, _ := s.ri.current()
	fmt.Fprintf(&b, "target=%s controller=%s state=%s holding=%v cfg=%+v refused=%v nodes=%d held=%d\n",
		target, name("v", s.c.version), s.c.State(), s.c.holding(), s.cfg, s.refused, s.nodes, s.held)
	fmt.Fprintf(&b, "server: %s\ncache: %s\nview: %s\n", object(srv), object(cached), object(viewed))
	for _, e := range s.inFlight {
		fmt.Fprintf(&b, "in flight: %s by %s: %s\n", e.typ, e.by, object(e.ds))
	}
	_, expecting := s.c.manager.Expecting()
	ownsStored := srv != nil && s.c.manager.IsOwnWrite(srv.UID, srv.Generation)
	ownsCached := cached != nil && s.c.manager.IsOwnWrite(cached.UID, cached.Generation)
	now := s.clock.Now()
	due := func(t *loopTimer) string {
		switch {
		case !t.armed():
			return "-"
		case t.at.After(now):
			return "armed"
		}
		return "due"
	}
	fmt.Fprintf(&b, "owns stored=%v cached=%v expecting=%v expect=%s retry=%s gate=%s door=%s held=%d deferred=%v failures=%d pending=%d config=%v version=%v drift=%v rollout=%v applied=%d\n",
		ownsStored, ownsCached, expecting, due(&s.c.expect), due(&s.c.retry.timer), due(&s.c.gate.timer), due(&s.c.door.timer),
		s.c.door.pending, s.c.gate.deferred, min(s.c.retry.failures, 2), len(s.ri.pending),
		s.configPending, len(s.ver.changed) > 0, len(s.ri.modified) > 0, len(s.ri.rollout) > 0, min(len(s.applied), 2))
	return b.String()
}

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
	"regexp"
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

var (
	modelDepth   = flag.Int("model.depth", 5, "how long the sequences of TestModelExhaustive/core are")
	repairsDepth = flag.Int("model.repairs-depth", 3, "how long the sequences of TestModelExhaustive/repairs are")
	// make model-reverts wants the shortest failing sequence, not the whole
	// search: breadth first, the depth that finds one is the last needed.
	modelFirst = flag.Bool("model.first", false, "stop TestModelExhaustive after the first depth that finds a violation")
)

// letter is one outside event of an exhaustive alphabet.
type letter struct {
	name string
	do   func(*propSim)
}

// alphabet is a set of letters, each run as every sequence of up to its depth.
type alphabet []letter

// coreLetters hold the events the convergence defects of
// testdata/model-reverts need: a restart, an addition by someone else with
// the annotations kept, an older owned version written back, a pod that
// stays unavailable, deletes refused, time passing, a controller that runs
// until it is quiet, and a short fight (another writer's 4 changes, 2 s
// apart). (The random runs have more: other replacements, nodes dropping out,
// relists, partial deliveries.)
var coreLetters = alphabet{
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

// repairLetters hold what the repair and adoption defects need, with a few
// core letters to reach the states they act in: a replacement with another
// selector, the controller's write and someone's label removal folded into
// one update by a re-list, a declared fight whose last repair fails and is
// retried, an insights-config change that keeps the extractor enabled, and
// another writer's first burst after a user's edits; and the writer
// patterns of the repair budget (issue 33): burst and pause, a new manager
// name on every write, one drain naming many managers, an update that
// clears managedFields, a periodic sync; and a re-list from a lagging watch
// cache right after the controller's create; a delete held by someone's
// finalizer while insights-config enables the extractor again; a loop
// timer that fires between the informer's queueing of drift and its
// notification of the loop; a repair whose response is lost; an unchanged
// insights-config relayed again while a repair waits; a new cluster
// version (its apply undoes an outstanding change too); a writer that
// rotates its manager name; a version's update that loses a race to
// another writer's change; the removal of an annotation the apply enforces;
// a disable whose delete the API refuses, then an enable a minute later.
// Their sequences are shorter: the fights and the burst are long already.
var repairLetters = alphabet{
	{"run", (*propSim).runToQuiet},
	{"restart", (*propSim).restart},
	{"sidecar added", func(s *propSim) { s.add(0) }},
	{"pod unavailable", (*propSim).holdPod},
	{"replaced with another selector", (*propSim).replaceWithAnotherSelector},
	{"coalesced write and label removal", (*propSim).coalescedWriteAndLabelRemoval},
	{"fight with a failed repair", (*propSim).fightWithAFailedRepair},
	{"priority class changed", (*propSim).changePriorityClass},
	{"burst after other edits", (*propSim).burstAfterOtherEdits},
	{"burst and pause", (*propSim).burstAndPause},
	{"new name every write", (*propSim).churnNames},
	{"many names in one drain", (*propSim).manyNamesInOneDrain},
	{"managedFields cleared", (*propSim).clearManagedFields},
	{"periodic sync", (*propSim).periodicSync},
	{"stale re-list after a create", (*propSim).staleRelistAfterCreate},
	{"finalizer-held delete, enabled again", (*propSim).finalizerHeldReenable},
	{"timer before the informer's notice", (*propSim).timerBeforeNotice},
	{"repair's response lost", (*propSim).lostRepairResponse},
	{"config re-listed", (*propSim).configRelisted},
	{"version bump", (*propSim).bumpVersion},
	{"rotating names", (*propSim).rotatingNames},
	{"version update races a writer", (*propSim).racedVersionApply},
	{"capability annotation removed", (*propSim).removeCapability},
	{"disabled with deletes refused, enabled again", (*propSim).refusedDeleteThenEnabled},
}

// modelRun is one sequence's outcome.
type modelRun struct {
	seq   []int
	state string // fingerprint after the sequence, "" when it stopped on a violation
	v     *violation
	story string
}

// TestModelExhaustive runs, for each alphabet, every sequence up to its
// depth (pruned by state) and reports how many it ran and how many distinct
// states they reached; each kind of violation is reported with its shortest
// sequence.
func TestModelExhaustive(t *testing.T) {
	quietKlog(t)
	for _, m := range []struct {
		name    string
		letters alphabet
		depth   int
	}{
		{"core", coreLetters, *modelDepth},
		{"repairs", repairLetters, *repairsDepth},
	} {
		t.Run(m.name, func(t *testing.T) { m.letters.explore(t, m.name, m.depth) })
	}
}

func (a alphabet) explore(t *testing.T, name string, maxDepth int) {
	start := time.Now()
	seen := map[string]bool{}
	frontier := [][]int{nil}
	ran := 0
	found := map[string]modelRun{}
	for depth := 1; depth <= maxDepth; depth++ {
		var next [][]int
		var batch [][]int
		for _, prefix := range frontier {
			for l := range a {
				batch = append(batch, append(slices.Clone(prefix), l))
			}
		}
		for _, r := range a.run(t, batch) {
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
		if *modelFirst && len(found) > 0 {
			maxDepth = depth
			break
		}
	}
	// Printed for make test's summary: the coverage of this run.
	fmt.Printf("model: %s: depth %d, %d letters: %d sequences run, %d distinct states, %d violation kind(s), %s\n",
		name, maxDepth, len(a), ran, len(seen), len(found), time.Since(start).Round(time.Second))
	for _, kind := range slices.Sorted(maps.Keys(found)) {
		r := found[kind]
		t.Errorf("%s: shortest sequence [%s]: %s\n%s", kind, a.sequenceName(r.seq), r.v.msg, r.story)
	}
}

func (a alphabet) sequenceName(seq []int) string {
	names := make([]string, len(seq))
	for i, l := range seq {
		names[i] = a[l].name
	}
	return strings.Join(names, ", ")
}

// run runs the sequences on all cores; each one replays from the start on a
// simulator of its own, then settles and checks.
func (a alphabet) run(t *testing.T, seqs [][]int) []modelRun {
	out := make([]modelRun, len(seqs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(seqs)); i = next.Add(1) - 1 {
				out[i] = a.runSequence(t, seqs[i])
			}
		}()
	}
	wg.Wait()
	for _, r := range out {
		if r.v != nil && r.v.kind == "aborted" {
			t.Fatalf("simulation aborted on [%s]: %s", a.sequenceName(r.seq), r.v.msg)
		}
	}
	return out
}

func (a alphabet) runSequence(t testing.TB, seq []int) (r modelRun) {
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
		a[l].do(s)
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
		meta := missingOwnedMetadata(ds) + "|" + name("v", ds.Annotations[resources.VersionAnnotation])
		return fmt.Sprintf("%s spec=%s meta=%s status=%v deleting=%v", name("uid", string(ds.UID)),
			name("spec", hex.EncodeToString(sum[:8])), meta, !s.statusBehind(ds), ds.DeletionTimestamp != nil)
	}
	var b strings.Builder
	srv := s.stored()
	cached, _ := s.cached()
	viewed, _ := s.ri.current()
	fmt.Fprintf(&b, "target=%s holding=%v cfg=%+v refused=%v nodes=%d held=%d\n",
		target, s.c.holding(), s.cfg, s.refused, s.nodes, s.held)
	fmt.Fprintf(&b, "server: %s\ncache: %s\nview: %s\n", object(srv), object(cached), object(viewed))
	for _, e := range s.inFlight {
		fmt.Fprintf(&b, "in flight: %s by %s: %s\n", e.typ, e.by, object(e.ds))
	}
	_, expecting := s.c.manager.Expecting()
	ownsStored := srv != nil && s.c.manager.IsOwnWrite(srv.UID, srv.Generation)
	ownsCached := cached != nil && s.c.manager.IsOwnWrite(cached.UID, cached.Generation)
	// The core's key is relative to now: states whose deadlines or backoff
	// differ are not merged.
	fmt.Fprintf(&b, "owns stored=%v cached=%v expecting=%v foreign=%v pending=%d ready=%v diagnosing=%v applied=%d\n",
		ownsStored, ownsCached, expecting, s.foreignOutstanding, len(s.ri.queued), readyWakes(s.ready()), s.c.rollouts.diagnosing, min(len(s.applied), 2))
	// The core marks the UIDs and versions it keeps: named here as the
	// objects' are, so that states which differ only in those names merge.
	fmt.Fprintf(&b, "core: %s\n", markedInKey.ReplaceAllStringFunc(s.c.core.Key(s.clock.Now()), func(m string) string {
		if v, ok := strings.CutPrefix(m, "V:"); ok {
			return "V:" + name("v", v)
		}
		return "UID:" + name("uid", strings.TrimPrefix(m, "UID:"))
	}))
	return b.String()
}

var markedInKey = regexp.MustCompile(`(UID|V):[^\s,}]*`)

// readyWakes names the ready sources, in the table's order.
func readyWakes(ready []loopSource) []string {
	var out []string
	for _, src := range ready {
		out = append(out, src.wake.String())
	}
	return out
}

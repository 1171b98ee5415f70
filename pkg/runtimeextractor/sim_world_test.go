package runtimeextractor

// The convergence model's simulated world: the API server, its watch and
// the informer cache, one controller process at a time, and the loop's
// wake-ups, which run the controller's own handle and afterWake.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openshift/library-go/pkg/operator/events"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
	"github.com/insights-runtime-extractor/controller/pkg/metrics"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// actor tells who made a server write, so invariants can tell the
// controller's own writes from other actors'.
type actor string

const (
	byController actor = "controller"
	byOther      actor = "someone else"         // a change the controller must undo
	byDaemonSets actor = "daemonset-controller" // status only
	// byUnanswered is the controller's write whose response it lost: it
	// cannot tell that write from someone else's (see loseResponse).
	byUnanswered actor = "controller, its response lost"
)

// watchEvent is a server write on its way to the informer cache.
type watchEvent struct {
	typ watch.EventType
	ds  *appsv1.DaemonSet
	by  actor
}

type violation struct{ kind, msg string }

// observedBy is a drift observation the informer queued and who caused it.
type observedBy struct {
	kind DriftKind
	by   actor
}

// applyRecord is what the controller's last successful apply left: the object
// (UID, generation) and the version it was applied for.
type applyRecord struct {
	uid     types.UID
	gen     int64
	version string
}

// requestBudget bounds the controller's requests, and the handlers it runs,
// between two outside stimuli (a change by someone, a delivered event, time
// passing). One stimulus leads to a few handlers of a few requests each; a
// loop that needs no stimulus to go on (a timer re-armed at zero) runs past
// it, with requests or without.
const requestBudget = 30

// simNodes is how many nodes should run a pod, until one drops out.
const simNodes = 3

// initialObject is what the server holds when the controller starts.
type initialObject int

const (
	initialNone       initialObject = iota
	initialDesired                  // written by a previous incarnation, rolled out
	initialOldVersion               // the same, one release older
)

type propSim struct {
	t     testing.TB
	abort func(msg string) // stops the run on a simulator failure
	seed  int64
	rng   *rand.Rand
	// ctx is the controller process's; endProcess ends it.
	ctx        context.Context
	endProcess context.CancelFunc

	api     *fakeapi.Server
	watcher watch.Interface
	rec     events.Recorder
	clock   *clocktesting.FakeClock // every timer of the controller
	cfg     *fakeConfig
	ver     *settableVersion
	c       *Controller
	ri      *daemonSetInformer
	m       *metrics.Metrics
	events  *eventLog // the Events of the current process
	reg     *prometheus.Registry

	// The DaemonSet controller's world: nodes that should run a pod, and
	// pods among them that stay unavailable.
	nodes, held int32

	sinceStimulus int      // controller requests since the last outside stimulus
	handled       int      // handlers run since the last outside stimulus
	applied       []string // versions the controller applied, oldest first

	refused    map[string]bool // verbs the API refuses to the controller
	inFlight   []watchEvent    // written on the server, not yet in the cache
	configHint chan struct{}   // the relay of the host's config notifications
	resyncTick chan time.Time  // the resync ticker, ticked by the resync step
	versionSeq int
	statusSeq  int

	// Ground truth for the drift invariants: someone else's changes not yet
	// delivered to the cache, and delivered but not yet drained by onDrift;
	// who caused each observation the informer queued; whether a relist
	// swallowed someone else's change whole (then only a resync can know).
	unseenOther, seenOther int
	observed               []observedBy
	lossy                  bool
	lastApply              *applyRecord
	controllerWrites       int
	// foreignOutstanding: someone else changed the DaemonSet since the
	// controller last wrote it; only a write made then undoes a change, and
	// only such a write may count in repairs_total.
	foreignOutstanding bool
	// foreignBeforeBoot: the outstanding change predates this process;
	// foreignUnowned: it changed an object the controller did not own (yet
	// to adopt it after a start): neither is a repair of its.
	foreignBeforeBoot, foreignUnowned bool
	// ambiguous: the controller's write whose response it lost is in the
	// world; it cannot tell it from someone else's change, so its next
	// write may count as a repair.
	ambiguous bool
	undid     int // writes of the controller's that undid someone's change
	// drainedWantingNone: the loop drained someone's changes while it
	// wanted no DaemonSet, or held (it deletes then, or waits, never
	// repairs): a write once it wants one again re-enables, and is no
	// repair of those.
	drainedWantingNone bool
	// repairTimes are the controller's repairs, told by what the server
	// saw, not by what the controller counted: writes of its that undid
	// someone else's change, since this process started. The repair
	// budget's bound holds over them (a restarted controller starts a budget
	// anew), and repairs_total must have counted each (a write whose
	// response was lost included).
	repairTimes []time.Time
	// loseResponse: the controller's next create or update of the DaemonSet
	// is made, and its response lost (a connection that breaks after the
	// request went out): the controller cannot tell whether it wrote.
	loseResponse bool
	// raceNextUpdate: someone else changes the DaemonSet just before the
	// controller's next update reaches the server, which then answers
	// Conflict (the update carries the resourceVersion it read).
	raceNextUpdate bool
	unanswered     bool // a write whose response was lost, its event not yet drained
	bursts         int  // burstAfterOtherEdits so far: each names new writers
	names          int  // manager names handed out to writers that churn them

	steps      int
	lines      int
	log        []string
	violations []violation
}

// newPropSim builds a simulator for seed; abort must not return.
func newPropSim(t testing.TB, seed int64, abort func(msg string)) *propSim {
	t.Helper()
	s := &propSim{
		t:          t,
		abort:      abort,
		seed:       seed,
		rng:        rand.New(rand.NewPCG(uint64(seed), 0x5eed)),
		rec:        newHostRecorder("property"),
		cfg:        &fakeConfig{good: true},
		ver:        newSettableVersion("4.21.0"),
		refused:    map[string]bool{},
		nodes:      simNodes,
		clock:      clocktesting.NewFakeClock(time.Unix(0, 0)),
		configHint: make(chan struct{}, 1),
		resyncTick: make(chan time.Time, 1),
	}
	s.api = newPropAPI()
	s.watchAPI()
	s.boot()
	return s
}

// watchAPI puts the simulator between the API server and the controller: a
// reactor that refuses and counts the controller's requests, and the watch.
func (s *propSim) watchAPI() {
	// Prepended last, so it answers first. Other actors' writes bypass it
	// (fakeapi's Create/Update, the tracker).
	s.api.Client.PrependReactor("*", "daemonsets", s.refuse)
	w, err := s.api.Client.Tracker().Watch(fakeapi.DaemonSets, resources.Namespace)
	s.must(err)
	s.watcher = w
}

// boot starts a controller process: a new informer (its factory is never
// started: the test is the watch), resource manager and state machine, with
// no memory of an earlier one.
func (s *propSim) boot() {
	// Each process has a context of its own, which its shutdown ends, as
	// Run's ends: the reads it started off the loop stop with it.
	s.ctx, s.endProcess = context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(s.api.Client, 0, informers.WithNamespace(resources.Namespace))
	ri, err := NewResourceInformer(s.rec, factory)
	s.must(err)
	s.m = metrics.New()
	s.events = &eventLog{}
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(s.m.Collectors()...)
	// The default backoff without its jitter: the order of the timers is the
	// simulation's, the same in every run.
	retries := workqueue.NewTypedItemExponentialFailureRateLimiter[string](DefaultRetryBase, DefaultRetryMax)
	s.c = NewRuntimeExtractorController(s.cfg, nil, nil, s.api.Client, s.rec, ri, WithEventRecorder(s.events),
		WithImages(resources.DefaultImages()), WithVersionSource(s.ver), WithMetrics(s.m), WithClock(s.clock), WithRateLimiter(retries))
	s.ri = s.c.informer
	s.c.machine.OnTransition(s.onTransition)
}

// shutdown stops the controller process (not the world), as the end of Run
// does.
func (s *propSim) shutdown() {
	s.c.step(s.ctx, core.Input{Kind: core.InputStop})
	s.endProcess()
}

func (s *propSim) close() {
	s.shutdown()
	s.watcher.Stop()
}

// newPropAPI is fakeapi's server on the plain object tracker: the field-managed
// tracker of fake.NewClientset builds a REST mapper on every write, which
// would dominate thousands of runs. fakeapi's Create and Update (UIDs,
// generations, conflicts, defaults) answer the client's create and update,
// and its DeleteReactor the UID precondition of a delete.
func newPropAPI() *fakeapi.Server {
	//lint:ignore SA1019 NewClientset's field-managed tracker is too slow here, see above.
	api := &fakeapi.Server{Client: fake.NewSimpleClientset()}
	api.Client.PrependReactor("create", "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		out, err := api.Create(a.(clienttesting.CreateAction).GetObject().(*appsv1.DaemonSet))
		return true, out, err
	})
	api.Client.PrependReactor("update", "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		out, err := api.Update(a.(clienttesting.UpdateAction).GetObject().(*appsv1.DaemonSet))
		return true, out, err
	})
	api.Client.PrependReactor("delete", "daemonsets", api.DeleteReactor)
	return api
}

func (s *propSim) refuse(a clienttesting.Action) (bool, runtime.Object, error) {
	s.sinceStimulus++
	if a.GetSubresource() == "" && s.refused[a.GetVerb()] {
		return true, nil, apierrors.NewServiceUnavailable("injected: " + a.GetVerb() + " refused")
	}
	if s.loseResponse && a.GetSubresource() == "" && (a.GetVerb() == "create" || a.GetVerb() == "update") {
		ds := a.(interface{ GetObject() runtime.Object }).GetObject().(*appsv1.DaemonSet)
		var err error
		if a.GetVerb() == "create" {
			_, err = s.api.Create(ds)
		} else {
			_, err = s.api.Update(ds)
		}
		s.loseResponse = false
		if err != nil {
			return true, nil, err
		}
		s.unanswered = true
		s.logf("    the %s was made; its response is lost", a.GetVerb())
		return true, nil, fmt.Errorf("injected: connection lost before the response: %w", io.ErrUnexpectedEOF)
	}
	if s.raceNextUpdate && a.GetSubresource() == "" && a.GetVerb() == "update" {
		s.raceNextUpdate = false
		s.updateAsOther(func(ds *appsv1.DaemonSet) string {
			ds.Spec.Template.Spec.Containers[0].Image = "quay.io/racer/extractor:latest"
			return "changes the extractor image just before the controller's update reaches the server"
		})
		return false, nil, nil
	}
	// A DaemonSet with finalizers is marked deleted, not removed, until
	// they are gone, as the API server does.
	if ds := s.stored(); a.GetVerb() == "delete" && ds != nil && len(ds.Finalizers) > 0 {
		if ds.DeletionTimestamp == nil {
			ds = ds.DeepCopy()
			now := metav1.NewTime(s.clock.Now())
			ds.DeletionTimestamp = &now
			marked, err := s.api.Update(ds)
			return true, marked, err
		}
		return true, ds, nil
	}
	return false, nil, nil
}

// ---- the watch and the cache ----

// drainWatchAs moves the server's new watch events in flight, tagged by.
func (s *propSim) drainWatchAs(by actor) {
	var prev watch.EventType
	for _, e := range s.drainWatch() {
		ds := e.Object.(*appsv1.DaemonSet)
		tag := by
		if by == byController && s.unanswered {
			tag, s.unanswered, s.ambiguous = byUnanswered, false, true
		}
		s.inFlight = append(s.inFlight, watchEvent{e.Type, ds, tag})
		if by == byOther {
			s.unseenOther++
		}
		// A replacement (delete, then create) is one write of the template.
		if by == byController && (e.Type != watch.Added || prev != watch.Deleted) {
			s.controllerWrites++
		}
		prev = e.Type
		// The controller's delete of someone else's object is the first half
		// of a replacement: their change is undone once the create lands
		// (a refused create leaves it to the retry). A delete a finalizer
		// holds only marks the object.
		// While the controller wants none (it acts on a disabling
		// insights-config), a deletion (anyone's) is what it wants:
		// nothing is left to undo.
		st := s.c.State()
		gone := (st == fsm.StateDisabled || st == fsm.StateDeleting) && (e.Type == watch.Deleted || ds.DeletionTimestamp != nil)
		kept := by == byDaemonSets || by == byController && (e.Type == watch.Deleted || ds.DeletionTimestamp != nil)
		was := s.foreignOutstanding
		s.foreignOutstanding = !gone && (by == byOther || kept && s.foreignOutstanding)
		if was && !s.foreignOutstanding && !gone && by == byController {
			s.undid++ // a write of the controller's undid it
		}
		s.foreignBeforeBoot = s.foreignBeforeBoot && by != byOther && s.foreignOutstanding
		if by == byOther {
			s.foreignUnowned = !s.c.manager.Owns(ds.UID)
		}
		s.logf("    server %s %s by %s", strings.ToLower(string(e.Type)), describeDS(ds), by)
	}
}

func (s *propSim) drainWatch() []watch.Event {
	var out []watch.Event
	for {
		select {
		case e := <-s.watcher.ResultChan():
			out = append(out, e)
		default:
			return out
		}
	}
}

// deliver hands the first n events in flight to the informer, as the shared
// informer's processDeltas does: write the indexer, then call the handler.
func (s *propSim) deliver(n int) {
	idx := s.ri.informer.GetIndexer()
	for _, e := range s.inFlight[:n] {
		s.logf("watch delivers %s %s (by %s)", strings.ToLower(string(e.typ)), describeDS(e.ds), e.by)
		queued := len(s.ri.queued)
		if e.typ == watch.Deleted {
			s.must(idx.Delete(e.ds))
			s.ri.onDelete(e.ds)
		} else if old, ok := s.cached(); ok { // the raw cache, as processDeltas reads it
			s.must(idx.Update(e.ds))
			s.ri.onUpdate(old, e.ds)
		} else {
			s.must(idx.Add(e.ds))
			s.ri.onAdd(e.ds, false)
		}
		s.noteObservations(queued, e.by)
		if e.by != byController && e.by != byUnanswered {
			s.stimulus() // news from outside
		}
		if e.by == byOther {
			s.unseenOther--
			s.seenOther++
		}
	}
	s.inFlight = s.inFlight[n:]
}

// relist is a watch that broke and re-listed: every event in flight coalesces
// into the server's current state (a delete arrives as a tombstone).
func (s *propSim) relist() {
	if len(s.inFlight) == 0 {
		return
	}
	by := byController
	for _, e := range s.inFlight {
		if e.by == byOther {
			by = byOther
			s.unseenOther--
			s.seenOther++
		}
	}
	s.inFlight = nil
	queued := len(s.ri.queued)
	idx := s.ri.informer.GetIndexer()
	srv := s.stored()
	old, cached := s.cached()
	s.logf("watch re-lists: the cache jumps to %s", describeDS(srv))
	switch {
	case srv != nil && cached:
		s.must(idx.Update(srv))
		s.ri.onUpdate(old, srv)
	case srv != nil:
		s.must(idx.Add(srv))
		s.ri.onAdd(srv, false)
	case cached:
		s.must(idx.Delete(old))
		s.ri.onDelete(cache.DeletedFinalStateUnknown{Key: resources.Namespace + "/" + resources.DaemonSetName, Obj: old})
	}
	// Someone else's change may leave no trace, e.g. the deletion of an object
	// the cache never saw: no event will ever tell the controller; only the
	// resync can. The expected deletion of an object the controller deleted
	// itself is no trace either: the controller rightly ignores it.
	// An owned label missing from the object re-listed is a trace, whatever
	// else the jump folded in: the controller always writes them.
	traced := srv != nil && missingOwnedLabel(srv) != ""
	if by == byOther && !traced && !slices.ContainsFunc(s.ri.queued[queued:], func(o observation) bool { return !o.Expected }) {
		s.lossy = true
		s.logf("    (someone else's change left no trace in the cache: lost until a resync)")
	}
	s.noteObservations(queued, by)
}

// noteObservations attributes to by the observations the informer queued
// beyond the first queued ones. A spec change that also damaged owned
// metadata is a metadata observation too: the drain counts it as one when the
// spec change is the controller's.
func (s *propSim) noteObservations(queued int, by actor) {
	for _, o := range s.ri.queued[queued:] {
		s.observed = append(s.observed, observedBy{o.Kind, by})
		if o.MetaDamaged {
			s.observed = append(s.observed, observedBy{DriftMetadata, by})
		}
	}
}

// otherObserved: the observations queued since the last drain include
// someone else's change (or the controller's whose answer was lost, which
// it cannot tell apart).
func (s *propSim) otherObserved() bool {
	return slices.ContainsFunc(s.observed, func(o observedBy) bool { return o.by == byOther || o.by == byUnanswered })
}

// timerBeforeNotice is the informer's handler caught between its two
// steps: it has queued drift and not yet notified the loop, and the loop's
// alarm comes due in between. Run takes drift first only once it is
// notified, so the alarm's wake-up goes first. The watch delivers what is
// in flight, the notification is held back while the alarm fires and the
// loop handles what is ready, then the notification lands.
func (s *propSim) timerBeforeNotice() {
	if len(s.inFlight) == 0 {
		return
	}
	notified := len(s.ri.modified) > 0
	s.deliver(len(s.inFlight))
	if notified || len(s.ri.modified) == 0 {
		return // nothing held back: no drift, or a notification already waiting
	}
	<-s.ri.modified
	s.logf("    (the handler has queued the drift and not yet notified the loop)")
	if s.timerDue() {
		for r := s.ready(); len(r) > 0 && len(s.violations) == 0; r = s.ready() {
			s.dispatch(pick(r, first).wake)
		}
	}
	notify(s.ri.modified)
	s.logf("the informer's handler notifies the loop")
}

// ---- the controller's loop ----

// sources is Run's table as the simulation feeds it: the config relay and
// the resync ticker are the simulation's (its resync step ticks it); the
// host's version channel has none (the version source's own stands for it).
func (s *propSim) sources() []loopSource {
	return loopSources(s.c, loopInputs{config: s.configHint, resync: s.resyncTick})
}

// tickResync is the resync ticker firing; the loop takes the tick when pick
// chooses it.
func (s *propSim) tickResync() {
	select {
	case s.resyncTick <- s.clock.Now():
	default: // a tick is waiting already, as a ticker drops them
	}
}

// ready lists the sources of Run's table that Run could receive from now
// without waiting, the results of reads off the loop aside (see
// loopSource.result). Timers that are due deliver first, as the clock
// would.
func (s *propSim) ready() []loopSource {
	s.clock.SetTime(s.clock.Now())
	var r []loopSource
	for _, src := range s.sources() {
		if !src.result && src.pending() {
			r = append(r, src)
		}
	}
	return r
}

// first is the model's choice among ready sources: the table's order, so
// that a sequence of steps replays exactly.
func first(int) int { return 0 }

// notifyConfig is the host's config notification, relayed (and coalesced)
// as Run's relay does.
func (s *propSim) notifyConfig() {
	select {
	case s.configHint <- struct{}{}:
	default:
	}
}

// advanceTo moves the clock to at, if it is later: time passing is a
// stimulus.
func (s *propSim) advanceTo(at time.Time, what string) {
	if s.clock.Now().Before(at) {
		s.clock.SetTime(at)
	}
	s.stimulus()
	s.logf("time passes to %s", what)
}

// dispatch is one iteration of Run's loop for w: it receives from the
// table's ready source of w, if one is (a scripted step may wake the loop
// for a notification that was coalesced away), then steps the core with w's
// input and carries out its effects, as Run does.
func (s *propSim) dispatch(w wake) {
	for _, src := range s.ready() {
		if src.wake == w {
			src.take()
			break
		}
	}
	if w == wakeResync {
		s.stimulus() // its time has passed
	}
	// A drift wake-up drains even an empty queue; any other drains what is queued, or should.
	queued, before := s.c.informer.driftQueued(), s.driftCounts()
	s.controller(w.String(), func() {
		s.c.step(s.ctx, inputs[w])
	})
	if w == wakeDrift || queued && !s.c.informer.driftQueued() {
		s.checkDrift(before)
		s.observed, s.seenOther = nil, 0 // onDrift drained them all
	}
}

// driftCounts reads drift_events_total by kind.
func (s *propSim) driftCounts() map[DriftKind]float64 {
	out := map[DriftKind]float64{}
	for _, k := range []DriftKind{DriftDeleted, DriftModified, DriftMetadata} {
		out[k] = max(s.metric(metrics.Namespace+"_drift_events_total", "kind", string(k)), 0)
	}
	return out
}

// checkDrift: every kind a drain counted as drift (drift_events_total moved
// from before) needs an observation of that kind caused by someone else; an
// own write is never drift.
func (s *propSim) checkDrift(before map[DriftKind]float64) {
	after := s.driftCounts()
	for _, k := range []DriftKind{DriftDeleted, DriftModified, DriftMetadata} {
		recorded, other, own := int(after[k]-before[k]), 0, 0
		for _, o := range s.observed {
			switch {
			case o.kind != k:
			case o.by == byOther, o.by == byUnanswered: // the controller cannot tell them apart
				other++
			default:
				own++
			}
		}
		if recorded > other {
			s.violate("drift-for-own-write/"+string(k), fmt.Sprintf(
				"onDrift counted %d drift (%s) but only %d of the %d %s observation(s) it drained came from someone else",
				recorded, k, other, other+own, k))
		}
	}
}

// controller runs f, the loop's code for one wake-up, then collects its
// writes.
func (s *propSim) controller(what string, f func()) {
	s.logf("controller handles %s (state %s%s)", what, s.c.State(), s.viewNote())
	foreign, repairs, writes, queued := s.foreignOutstanding, s.repairsCounted(), s.controllerWrites, s.c.informer.driftQueued()
	// The informer notifies of every change; the loop takes them first, but
	// only someone else's make a repair wait.
	notified, requests, ambiguous := len(s.ri.modified) > 0 && s.otherObserved(), s.sinceStimulus, s.ambiguous
	w := s.witness(what)
	// The timers that only re-assert the level: the resync, and the
	// expectation's deadline when no retry or front door (whose actions
	// may write) comes due with it.
	now := s.clock.Now()
	reassertOnly := what == wakeResync.String()
	if due := s.c.core.Due(now); what == wakeAlarm.String() && slices.Contains(due, core.PartExpect) && !slices.Contains(due, core.PartRetry) && !slices.Contains(due, core.PartDoor) {
		reassertOnly, what = true, "expectation's deadline"
	}
	f()
	undrained := s.c.informer.driftQueued()
	// Once the loop is told of drift, its next request is the repair's: no
	// wake-up may spend requests (a status write, an apply the door let
	// through) and leave the drift queued.
	if notified && what != wakeDrift.String() && undrained && s.sinceStimulus > requests {
		s.violate("request-before-repair", fmt.Sprintf("the %s made %d request(s) while a drift notification waited", what, s.sinceStimulus-requests))
	}
	s.drainWatchAs(byController)
	n := s.repairsCounted() - repairs
	if n > 0 && !foreign && !ambiguous {
		s.violate("repair-without-foreign-change", fmt.Sprintf("repairs_total rose by %v for a write that undid no one's change", n))
	}
	if s.controllerWrites > writes && !s.unansweredInFlight() {
		s.ambiguous = false // a write of its since, answered
	}
	s.checkRepairMade(w, what)
	// A timer that only re-asserts the same level must leave repairs of
	// drift the informer has queued to the gate, which its wake-up feeds
	// first: a write of its over a change still queued would be a repair the
	// budget never paid for. (One over a change no event has told of yet is
	// the resync's job: the safety net for lost events.)
	if reassertOnly && foreign && queued && undrained && s.controllerWrites > writes && n == 0 {
		s.violate("repair-outside-gate", fmt.Sprintf("the %s wrote over someone else's change that the informer had queued for the repair gate", what))
	}
	s.handled++
	switch {
	case s.sinceStimulus > requestBudget:
		s.violate("hot-loop", fmt.Sprintf("%d requests since the last outside stimulus (budget %d)", s.sinceStimulus, requestBudget))
	case s.handled > requestBudget:
		s.violate("hot-loop", fmt.Sprintf("%d handlers ran since the last outside stimulus (budget %d)", s.handled, requestBudget))
	}
}

// runToQuiet lets the controller run with the world as it is (refusals
// stay): every event is delivered and every ready source handled, due
// timers included, until nothing is left or a violation stops it.
func (s *propSim) runToQuiet() {
	s.logf("controller runs until quiet")
	for n := 0; len(s.violations) == 0; n++ {
		if n == 1000 {
			s.violate("no-quiet", "still busy after 1000 steps")
			return
		}
		switch r := s.ready(); {
		case len(s.inFlight) > 0:
			s.deliver(len(s.inFlight))
		case len(r) > 0:
			s.dispatch(pick(r, first).wake)
		default:
			return
		}
	}
}

// runThroughDoor runs to quiet, then lets the signals the front door holds
// play out at its trailing edge, until it holds none.
func (s *propSim) runThroughDoor() {
	s.runToQuiet()
	for s.c.core.Queued() != 0 && len(s.violations) == 0 {
		at, _ := s.c.core.At(core.PartDoor)
		s.advanceTo(at, "the front door's trailing edge")
		s.runToQuiet()
	}
}

// viewNote tells, for the story, when the controller's view differs from the
// cache: it hides a cached object known to be gone.
func (s *propSim) viewNote() string {
	cached, ok := s.cached()
	if _, visible := s.ri.current(); ok && !visible {
		return ", view hides cached " + string(cached.UID)
	}
	return ""
}

// onTransition records the transitions and checks every entry into Running.
func (s *propSim) onTransition(tr fsm.Transition) {
	note := ""
	if tr.Note != "" {
		note = " (" + tr.Note + ")"
	}
	s.logf("    machine %s --%s--> %s, action %s%s", tr.From, describeEvent(tr.Event), tr.To, tr.Action, note)
	if (tr.To == fsm.StateDisabled || tr.To == fsm.StateDeleting) && s.stored() == nil {
		s.foreignOutstanding = false // none is wanted, none is there: nothing is left to undo
	}
	switch e := tr.Event.(type) {
	case fsm.Applied:
		s.recordApply(e.UID, e.Generation)
	case fsm.AppliedUnchanged:
		s.recordApply(e.UID, e.Generation)
	}
	if tr.To == fsm.StateRunning && tr.From != fsm.StateRunning {
		s.checkRunningEntry(tr)
	}
}

// recordApply notes a successful apply: the object it left in place (the
// outcome event names it) at the controller's version.
func (s *propSim) recordApply(uid string, gen int64) {
	s.lastApply = &applyRecord{uid: types.UID(uid), gen: gen, version: s.c.core.Version()}
	if n := len(s.applied); n == 0 || s.applied[n-1] != s.c.core.Version() {
		s.applied = append(s.applied, s.c.core.Version())
	}
}

// checkRunningEntry: Running means the last successful apply, at the desired
// version, is what is rolled out; when the controller has seen every change by
// someone else, the server must hold exactly that object.
func (s *propSim) checkRunningEntry(tr fsm.Transition) {
	on := describeEvent(tr.Event)
	la := s.lastApply
	if la == nil {
		s.violate("running-without-apply", fmt.Sprintf("%s -> Running on %s with no successful apply ever", tr.From, on))
		return
	}
	if la.version != s.c.core.Version() {
		s.violate("running-unapplied-version", fmt.Sprintf(
			"%s -> Running on %s, but the last successful apply (%s gen %d) was for version %s and the desired version is %s",
			tr.From, on, la.uid, la.gen, la.version, s.c.core.Version()))
		return
	}
	if rc, ok := tr.Event.(fsm.RolloutComplete); ok && (types.UID(rc.UID) != la.uid || rc.Generation != la.gen) {
		s.violate("running-unapplied-generation", fmt.Sprintf(
			"%s -> Running on %s, but the last successful apply left %s gen %d", tr.From, on, la.uid, la.gen))
		return
	}
	if s.unseenOther > 0 || s.seenOther > 0 || s.lossy {
		return // the server may hold changes the controller cannot know yet
	}
	if s.c.core.Deferring() {
		return // it knows of them: their repair waits for the repair gate's backoff
	}
	srv := s.stored()
	switch {
	case srv == nil:
		s.violate("running-without-daemonset", fmt.Sprintf(
			"%s -> Running on %s (last apply: %s gen %d), but the server has no DaemonSet and nobody else touched it",
			tr.From, on, la.uid, la.gen))
	case srv.UID != la.uid || srv.Generation != la.gen:
		s.violate("running-other-object", fmt.Sprintf(
			"%s -> Running on %s (last apply: %s gen %d), but the server holds %s", tr.From, on, la.uid, la.gen, describeDS(srv)))
	case missingOwnedLabel(srv) != "":
		s.violate("running-damaged-metadata", fmt.Sprintf(
			"%s -> Running on %s, but the server's DaemonSet lacks label %s", tr.From, on, missingOwnedLabel(srv)))
	}
}

// ---- helpers ----

func (s *propSim) stored() *appsv1.DaemonSet {
	ds, err := s.api.Stored(resources.Namespace, resources.DaemonSetName)
	s.must(err)
	return ds
}

// cached is the informer cache as it is (not the controller's view, which
// hides objects known to be gone): what processDeltas and Replace compare with.
func (s *propSim) cached() (*appsv1.DaemonSet, bool) {
	ds := s.ri.cachedObject()
	return ds, ds != nil
}

func (s *propSim) violate(kind, msg string) {
	s.violations = append(s.violations, violation{kind, msg})
	s.logf("!!! VIOLATION %s: %s", kind, msg)
}

func (s *propSim) must(err error) {
	if err != nil {
		s.abort(fmt.Sprintf("seed %d: %v\n%s", s.seed, err, s.story()))
	}
}

func (s *propSim) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if !strings.HasPrefix(line, "    ") {
		s.lines++
		line = fmt.Sprintf("%3d. %s", s.lines, line)
	}
	s.log = append(s.log, line)
}

func (s *propSim) story() string {
	return fmt.Sprintf("seed %d:\n%s", s.seed, strings.Join(s.log, "\n"))
}

// describeEvent is fsm.Describe with the object's UID where the event names one.
func describeEvent(e fsm.Event) string {
	switch e := e.(type) {
	case fsm.RolloutComplete:
		return fmt.Sprintf("%s(%s gen=%d)", e.Name(), e.UID, e.Generation)
	case fsm.Applied:
		return fmt.Sprintf("%s(%s gen=%d)", e.Name(), e.UID, e.Generation)
	case fsm.AppliedUnchanged:
		return fmt.Sprintf("%s(%s gen=%d)", e.Name(), e.UID, e.Generation)
	}
	return fsm.Describe(e)
}

// describeDS renders a DaemonSet as the story needs it.
func describeDS(ds *appsv1.DaemonSet) string {
	if ds == nil {
		return "<none>"
	}
	var notes []string
	if resources.RolloutOf(ds).Complete() {
		notes = append(notes, "rolled out")
	}
	if k := missingOwnedLabel(ds); k != "" {
		notes = append(notes, "no label "+k)
	}
	if len(ds.Spec.Template.Spec.Containers) > 0 && strings.Contains(ds.Spec.Template.Spec.Containers[0].Image, "someone") {
		notes = append(notes, "foreign image")
	}
	if ds.Spec.MinReadySeconds > 0 {
		notes = append(notes, fmt.Sprintf("minReadySeconds %d", ds.Spec.MinReadySeconds))
	}
	if len(ds.Spec.Template.Spec.Containers) > 0 && !strings.Contains(ds.Spec.Template.Spec.Containers[0].Image, "someone") &&
		ds.Spec.MinReadySeconds == 0 && !specDesired(ds, "", ds.Spec.Template.Spec.PriorityClassName) {
		notes = append(notes, "spec differs")
	}
	if n := ds.Status.NumberUnavailable; n > 0 {
		notes = append(notes, fmt.Sprintf("%d unavailable", n))
	}
	return fmt.Sprintf("%s gen %d v%s [%s]", ds.UID, ds.Generation, ds.Annotations[resources.VersionAnnotation], strings.Join(notes, ", "))
}

// unansweredInFlight: the controller's write whose response it lost is
// still on its way to the cache.
func (s *propSim) unansweredInFlight() bool {
	return slices.ContainsFunc(s.inFlight, func(e watchEvent) bool { return e.by == byUnanswered })
}

// checkRepairsCounted: repairs_total counted every repair made (when names
// the moment for the violation).
func (s *propSim) checkRepairsCounted(when string) {
	if made, counted := len(s.repairTimes), s.repairsCounted(); float64(made) > counted {
		s.violate("repair-uncounted", fmt.Sprintf("the %s made a repair that repairs_total did not count (%d made, %v counted)", when, made, counted))
	}
}

// repairWitness is what the simulator knows, before a handler runs, to
// tell whether a write of the handler's is a repair.
type repairWitness struct {
	undid int // s.undid before the handler
	// repairable: the outstanding change is one the controller's gate was
	// told of (every change of someone else's reached the cache and the
	// loop drained it, or drains it now), made to an object of this
	// process's, while it wanted one. A write over a change the loop has
	// yet to drain is a level's or a timer's, not a writer's to drive; a
	// process corrects what it finds at start (and retries that) before
	// its gate heard of any change; and a write once it wants a DaemonSet
	// again re-enables.
	repairable                bool
	drains, deferred, gateDue bool
}

func (s *propSim) witness(what string) repairWitness {
	drains := what == wakeDrift.String() || what == wakeDriftHint.String()
	if drains && s.seenOther > 0 {
		s.drainedWantingNone = s.c.level() != (fsm.Enabled{}) // disabled, or holding
	}
	told := s.unseenOther == 0 && !s.lossy && (s.seenOther == 0 || drains)
	return repairWitness{
		undid:      s.undid,
		repairable: told && !s.foreignBeforeBoot && !s.foreignUnowned && !s.drainedWantingNone,
		drains:     drains,
		deferred:   s.c.core.Deferring(),
		gateDue:    slices.Contains(s.c.core.Due(s.clock.Now()), core.PartGate),
	}
}

// checkRepairMade: a write of the handler's that undid someone's change
// (w: before it) is a repair, whatever led to it and whatever its caller
// heard back. The budget's bound is checked over these; repairs_total must
// count each (one whose answer was lost once the controller learns it was
// made: settleAndCheck checks it then); and while the gate defers a repair,
// only the gate may make it: on its timer, or on new drift it decides on (a
// change of the version the controller targets is no exception: its write
// undoes the change as well).
func (s *propSim) checkRepairMade(w repairWitness, what string) {
	if s.undid == w.undid || !w.repairable {
		return
	}
	s.repairTimes = append(s.repairTimes, s.clock.Now())
	if !s.ambiguous {
		s.checkRepairsCounted(what)
	}
	if w.deferred && !w.gateDue && !w.drains {
		s.violate("repair-before-the-gate", fmt.Sprintf("the %s wrote over someone else's change while the repair gate deferred its repair", what))
	}
	s.checkRepairBudget()
}

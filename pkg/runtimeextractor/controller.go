package runtimeextractor

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/config/clusteroperator/v1helpers"
	"github.com/openshift/library-go/pkg/operator/events"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/metrics"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/tlsprofile"
)

// retryKey is the rate limiter's only item: the controller manages one object.
const retryKey = "runtime-extractor"

// Controller keeps the runtime extractor DaemonSet in its desired state. One
// goroutine (Run) owns the state machine: sources only signal it, it turns the
// signals into typed events from what the caches show, fires them, and carries
// out the action each transition names, feeding the outcome back as an event.
type Controller struct {
	configNotifier ConfigNotifier
	updateCh       chan struct{}
	tlsProfile     *configv1.TLSSecurityProfile
	kubeClient     kubernetes.Interface
	recorder       events.Recorder // the host's; names our Events' source component
	eventRecorder  record.EventRecorder
	events         changeEvents

	informer    *daemonSetInformer
	runInformer func(ctx context.Context) // set when the controller made its own informer
	extraDrift  <-chan struct{}           // drift hints from a caller-supplied ResourceInformer

	manager       *resources.Manager
	machine       *fsm.Machine
	limiter       workqueue.TypedRateLimiter[string]
	resync        time.Duration
	versions      VersionSource
	tls           TLSProfileSource // nil: tlsProfile, fixed
	images        *resources.Images
	defaultImages bool // an unset RELATED_IMAGE_* selects the default
	metrics       *metrics.Metrics
	status        *statusWriter
	door          *frontDoor    // owned by the Run goroutine
	rollouts      *rolloutWatch // owned by the Run goroutine
	// clock tells the repair streak the time; tests replace it.
	clock clock.PassiveClock

	// versionSignals counts handled updateCh notifications (tests wait on it).
	versionSignals atomic.Uint64

	// published is the latest snapshot, for Status; statusChanged signals a
	// new one.
	publishedMu   sync.Mutex
	published     status.Snapshot
	statusChanged chan struct{}

	// Owned by the Run goroutine.
	deleted    []types.UID // objects this controller deleted, newest last
	deletedAny bool        // this controller has deleted the DaemonSet before
	driftKinds []DriftKind // what the drift being repaired changed, for its Event
	lastDrift  []DriftKind // what the last drain counted as drift (log, tests)
	// driftWriters made the drift being repaired, from managedFields;
	// driftUnnamed: some of it no entry names.
	driftWriters []fieldWriter
	driftUnnamed bool
	// streak is the streak of repairs, and its fight (fight.go);
	// repairDeferred: a drift waits for the streak's backoff.
	streak         repairStreak
	repairDeferred bool
	upgradeFrom    string   // the version before the current upgrade, for its Event
	tlsKept        *keptTLS // while tls cannot tell the profile: what the DaemonSet had
	version        string
	failures       int
	lastErr        error
	retryIn        time.Duration
	retry          *time.Timer
	retryC         <-chan time.Time
	imagesErr      error

	// The last apply's DaemonSet before it (nil: none) and desired state:
	// its Event, if it wrote, names a TLS change from them.
	applyFrom *appsv1.DaemonSet
	applyTo   resources.Desired
}

// NewRuntimeExtractorController is a constructor for the controller that is in
// charge of the runtime-extractor deployment lifecycle.
//
// configNotifier supplies the configuration (config.Source reads insights-config);
// a notification on updateCh (may be nil) means the cluster version may have
// changed; tlsProfile (nil means Intermediate) configures kube-rbac-proxy;
// resourceInformer should come from NewResourceInformer. Options add what the
// original did not have: the resync period, a version source, metrics, status.
func NewRuntimeExtractorController(
	configNotifier ConfigNotifier,
	updateCh chan struct{},
	tlsProfile *configv1.TLSSecurityProfile,
	kubeClient kubernetes.Interface,
	recorder events.Recorder,
	resourceInformer ResourceInformer,
	opts ...Option,
) *Controller {
	c := &Controller{
		configNotifier: configNotifier,
		updateCh:       updateCh,
		tlsProfile:     tlsProfile,
		kubeClient:     kubeClient,
		recorder:       recorder,
		machine:        fsm.New(fsm.StateDisabled),
		limiter:        defaultRateLimiter(),
		resync:         DefaultResync,
		statusChanged:  make(chan struct{}, 1),
		door:           newFrontDoor(clock.RealClock{}),
		rollouts:       newRolloutWatch(DefaultRolloutDeadline),
		clock:          clock.RealClock{},
		defaultImages:  true,
	}
	for _, o := range opts {
		o(c)
	}
	if c.versions == nil {
		c.versions = envVersion{}
	}
	if c.images == nil {
		images, err := resources.ImagesFromEnv(os.Getenv, c.defaultImages)
		// An invalid image is never applied: every Apply fails with this error
		// (visible as Degraded and a Warning) until the environment is fixed.
		c.images, c.imagesErr = &images, err
	}

	ri, ok := resourceInformer.(*daemonSetInformer)
	if !ok {
		// A caller-supplied ResourceInformer only says "something changed"; the
		// controller still needs a cache of the DaemonSet, so it keeps its own.
		factory := informers.NewSharedInformerFactoryWithOptions(kubeClient, 0, informers.WithNamespace(resources.Namespace))
		own, err := NewResourceInformer(recorder, factory)
		if err != nil {
			panic(fmt.Sprintf("runtimeextractor: %v", err)) // only fails on a stopped informer, impossible here
		}
		ri = own
		c.runInformer = func(ctx context.Context) {
			factory.Start(ctx.Done())
			go own.Run(ctx, 1)
		}
		if resourceInformer != nil {
			c.extraDrift = resourceInformer.ResourceModified()
		}
	}
	c.informer = ri
	c.events.recorder = c.eventRecorder
	// library-go's generic DaemonSetCreated/Updated Events are dropped: the
	// controller records its own, saying why (events.go), and logging them
	// dumped a raw Event struct per write.
	c.manager = resources.NewManager(kubeClient, ri.lister, discardRecorder{component: c.component()}, resources.Desired{
		Images: *c.images, TLSProfile: tlsProfile,
	})
	ownWrite := c.manager.IsOwnWrite
	ri.ownWrite.Store(&ownWrite)
	if c.metrics != nil {
		c.metrics.SetState(c.machine.State())
	}
	c.machine.OnTransition(c.observeTransition)
	return c
}

// component is the source of our Events: the host's component name.
func (c *Controller) component() string {
	if c.recorder != nil && c.recorder.ComponentName() != "" {
		return c.recorder.ComponentName()
	}
	return "runtime-extractor-controller"
}

// State returns the machine's current state (safe from any goroutine).
func (c *Controller) State() fsm.State { return c.machine.State() }

// relay drains in into a coalescing notification channel until ctx is done or
// in is closed, so that no sender ever waits for the control loop. A nil in
// gives a nil channel (never ready).
func relay(ctx context.Context, wg *sync.WaitGroup, in <-chan struct{}) <-chan struct{} {
	if in == nil {
		return nil
	}
	out := make(chan struct{}, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-in:
				if !ok {
					return
				}
				notify(out)
			}
		}
	}()
	return out
}

// Manager returns the resource manager (the seed's ResourceManager).
func (c *Controller) Manager() *resources.Manager { return c.manager }

// Run runs the controller until ctx is done. It waits for the caches, derives
// the first events from what it observes, then reacts to every source. Cancelling
// ctx stops it once any in-flight action has returned.
func (c *Controller) Run(ctx context.Context) {
	if c.runInformer != nil {
		c.runInformer(ctx)
	}
	// The host's goroutines send on updateCh and on its config channel, some
	// with blocking sends: both are drained from the start, even while an
	// action runs, and their notifications coalesce.
	configCh, stopConfig := c.configNotifier.ConfigChanged()
	defer stopConfig()
	relayCtx, stopRelays := context.WithCancel(ctx)
	var relays sync.WaitGroup
	defer func() { stopRelays(); relays.Wait() }()
	configHint := relay(relayCtx, &relays, configCh)
	versionHint := relay(relayCtx, &relays, c.updateCh)
	var tlsChanged <-chan struct{}
	if c.tls != nil {
		tlsChanged = c.tls.Changed()
	}

	if c.eventRecorder == nil {
		rec, stop := newEventRecorder(ctx, c.kubeClient, c.component())
		defer stop()
		c.events.recorder = rec
	}

	if !c.waitForCaches(ctx) {
		return
	}
	defer c.stopRetry()
	defer c.door.reset() // a later Run starts with nothing held
	defer c.rollouts.reset()
	defer func() { c.tlsKept = nil }()          // a later Run looks at the DaemonSet again
	defer c.endStreak("the controller stopped") // a later Run has no memory of this one's repairs
	if c.status != nil {
		statusCtx, stopStatus := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); c.status.run(statusCtx) }()
		defer func() { stopStatus(); <-done }()
	}

	c.version = c.versions.Version()
	if ds, ok := c.informer.current(); ok {
		klog.Infof("observed DaemonSet %s/%s generation %d at version %q", ds.Namespace, ds.Name, ds.Generation, ds.Annotations[resources.VersionAnnotation])
	}
	klog.Infof("runtime extractor controller started: target version %q", c.version)
	// The first event is the observed level: Enabled applies (adopting or
	// correcting what exists), Disabled deletes what the cache shows.
	c.reassert(ctx)
	c.report()
	c.observeHolding()

	resync := time.NewTicker(c.resync)
	defer resync.Stop()
	// Armed while an own write is awaited in the cache, and only then: a
	// write the cache shows, or a delete, disarms it.
	var expect expectTimer
	defer expect.stop()
	// Armed while the repair streak has something due: a deferred repair,
	// or the end of the streak.
	var streakTimer deadlineTimer
	defer streakTimer.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-configHint:
			// Always re-assert, even when the newest content was rejected: the
			// level comes from the last good config, which may have changed in
			// the same (coalesced) notification.
			c.levelSignal(ctx, signalConfig)
		case <-versionHint:
			c.levelSignal(ctx, signalVersion)
			c.versionSignals.Add(1)
		case <-c.versions.Changed():
			c.levelSignal(ctx, signalVersion)
		case <-tlsChanged:
			c.levelSignal(ctx, signalTLS)
		case <-c.door.C():
			if k := c.door.take(); k != 0 {
				c.actOnLevel(ctx, k)
			}
		case <-c.informer.ResourceModified():
			c.onDrift(ctx, false)
		case <-c.extraDrift:
			c.onDrift(ctx, true) // a caller's informer: no observations, only a hint
		case <-c.informer.rollout:
			c.onRollout(ctx)
		case <-c.retryC:
			c.retryC = nil
			c.reassert(ctx)
		case <-resync.C:
			c.onResync(ctx)
		case <-expect.c:
			expect.fired()
			c.onExpectationDue(ctx)
		case <-streakTimer.c:
			streakTimer.fired()
			c.onStreakDue(ctx)
		case <-c.rollouts.C():
			if ds, ok := c.informer.current(); ok {
				c.rollouts.expired(ctx, c.kubeClient, ds, time.Now())
			}
		case r := <-c.rollouts.result:
			if c.rollouts.accept(r) {
				c.stuckChanged()
			}
		case r := <-c.rollouts.named:
			c.rollouts.acceptNames(r)
		}
		if ds, _ := c.informer.current(); c.rollouts.observe(ctx, c.kubeClient, c.machine.State(), ds, time.Now()) {
			c.stuckChanged()
		}
		expect.follow(c.manager.Expecting())
		at, due := c.streak.next(c.repairDeferred)
		streakTimer.follow(at, due, c.clock.Now())
		c.report()
		c.observeHolding()
	}
}

// onResync re-asserts the level, unless a repair waits for the streak's
// backoff: its timer re-asserts soon, and a resync must not undo the backoff.
func (c *Controller) onResync(ctx context.Context) {
	if !c.repairDeferred {
		c.reassert(ctx)
	}
}

// onExpectationDue acts on an own write the cache never showed: it re-reads
// and acts, unless a failed action backs off (its retry re-reads then) or a
// repair waits for the streak's backoff (its timer does).
func (c *Controller) onExpectationDue(ctx context.Context) {
	if c.retryC == nil && !c.repairDeferred {
		c.reassert(ctx)
	}
}

// expectTimer is Run's timer for an own write the cache has yet to show.
type expectTimer struct {
	t *time.Timer
	c <-chan time.Time
}

// follow arms the timer for a pending expectation (d, true) when none is
// armed, and disarms it when none is pending.
func (e *expectTimer) follow(d time.Duration, pending bool) {
	switch {
	case pending && e.t == nil:
		e.t = time.NewTimer(d)
		e.c = e.t.C
	case !pending:
		e.stop()
	}
}

func (e *expectTimer) fired() { e.t, e.c = nil, nil }

func (e *expectTimer) stop() {
	if e.t != nil {
		e.t.Stop()
		e.fired()
	}
}

// deadlineTimer is a Run timer that follows an instant that may move.
type deadlineTimer struct {
	expectTimer
	at time.Time
}

// follow arms the timer for at (now is the time of at's clock), re-arms it
// when at moved, and disarms it when !ok.
func (d *deadlineTimer) follow(at time.Time, ok bool, now time.Time) {
	switch {
	case !ok:
		d.stop()
	case d.t == nil || !at.Equal(d.at):
		d.stop()
		d.expectTimer.follow(at.Sub(now), true)
		d.at = at
	}
}

// observeHolding shows in the state metric whether the controller holds:
// its machine's state says nothing of the cluster then.
func (c *Controller) observeHolding() {
	if c.metrics != nil {
		c.metrics.SetHolding(c.holding())
	}
}

func (c *Controller) waitForCaches(ctx context.Context) bool {
	synced := []cache.InformerSynced{c.informer.informer.HasSynced}
	for _, src := range []any{c.configNotifier, c.versions, c.tls} {
		if s, ok := src.(syncer); ok {
			synced = append(synced, s.HasSynced)
		}
	}
	return cache.WaitForNamedCacheSync("RuntimeExtractorController", ctx.Done(), synced...)
}

// level is the observed config as an event: the level re-assert. It is nil
// while the controller holds (see holding).
func (c *Controller) level() fsm.Event {
	if c.holding() {
		return nil
	}
	if cfg := c.configNotifier.Config(); cfg != nil && cfg.DataReporting.DisableRuntimeExtractor {
		return fsm.Disabled{}
	}
	return fsm.Enabled{}
}

func (c *Controller) reassert(ctx context.Context) { c.fire(ctx, c.level()) }

// holding: the notifier has rejected the configuration and has seen no good
// one since this process started, so the admin's choice is unknown. The
// controller then changes nothing (a present DaemonSet stays as it is, an
// absent one absent) and only reports the config error, until a valid config
// (or the ConfigMap's removal, which means the defaults) arrives.
func (c *Controller) holding() bool {
	k, ok := c.configNotifier.(configKnower)
	return ok && !k.HasGoodConfig()
}

// levelSignal acts on a config or version signal now, or holds it for the
// front door's trailing edge (frontdoor.go).
func (c *Controller) levelSignal(ctx context.Context, k signalKind) {
	if c.door.admit(k) {
		c.actOnLevel(ctx, k)
	}
}

// actOnLevel re-asserts the level; a version signal also checks the version,
// which re-asserts too.
func (c *Controller) actOnLevel(ctx context.Context, k signalKind) {
	if k&signalVersion != 0 {
		c.onVersion(ctx)
	} else {
		c.reassert(ctx)
	}
	c.door.acted()
}

func (c *Controller) onVersion(ctx context.Context) {
	v := c.versions.Version()
	if v == c.version {
		// updateCh may fire without a version change: re-assert, which writes
		// only if something (e.g. an image) really changed.
		c.reassert(ctx)
		return
	}
	from := c.version
	c.version = v
	if c.machine.State() != fsm.StateUpgrading {
		c.upgradeFrom = from // an upgrade overtaken by another still started from here
	}
	c.fire(ctx, fsm.VersionChanged{From: from, To: v})
}

// onDrift turns drift notifications into Modified or Deleted. It re-checks
// each spec change against the manager's own writes now, on the goroutine that
// made them, so an own write whose watch event beat the bookkeeping is not
// mistaken for drift; a metadata change is the controller's own only when it
// carries exactly the owned metadata it last wrote (a removed label never
// does), and a deletion only when it deleted that object. One Event reports
// the whole drain.
func (c *Controller) onDrift(ctx context.Context, hint bool) {
	if c.holding() {
		c.informer.drainDrift()
		return
	}
	state := c.machine.State()
	drifted, gone := hint, false
	c.lastDrift = c.lastDrift[:0]
	var writers []fieldWriter
	unnamed := false
	ds, present := c.informer.current()
	for _, o := range c.informer.drainDrift() {
		switch o.kind {
		case DriftModified, DriftMetadata:
			if !present || ds.UID != o.uid {
				continue // a late event of an object since gone; its deletion is an observation of its own
			}
			if ds.DeletionTimestamp != nil {
				continue // being deleted (e.g. orphaning its pods): its deletion follows, and is the drift to repair
			}
			if o.kind == DriftModified && c.manager.IsOwnWrite(o.uid, o.generation) ||
				o.kind == DriftMetadata && c.manager.IsOwnMetadata(o.uid, o.version, o.meta) {
				continue // the controller's own write (a spec, or a new version)
			}
		case DriftDeleted:
			c.manager.ObservedDeletion(o.uid)
			if o.expected || c.deletedByUs(o.uid) || state == fsm.StateDeleting || state == fsm.StateDisabled {
				gone = true // not drift; it may end Deleting
				continue
			}
		}
		drifted = true
		switch {
		case o.kind == DriftDeleted: // nothing to read: no one is named, no one guessed
		case len(o.writers) == 0:
			unnamed = true
		default:
			writers = mergeWriters(writers, o.writers)
		}
		if !slices.Contains(c.lastDrift, o.kind) {
			c.lastDrift = append(c.lastDrift, o.kind)
			if c.metrics != nil {
				c.metrics.ObserveDrift(string(o.kind))
			}
		}
	}
	switch {
	case len(c.lastDrift) > 0 && c.repairDeferred:
		// What waits for the backoff adds up: its repair's Event names it all.
		for _, k := range c.lastDrift {
			if !slices.Contains(c.driftKinds, k) {
				c.driftKinds = append(c.driftKinds, k)
			}
		}
		c.driftWriters = mergeWriters(c.driftWriters, writers)
		c.driftUnnamed = c.driftUnnamed || unnamed
	case len(c.lastDrift) > 0:
		c.driftKinds = slices.Clone(c.lastDrift)
		c.driftWriters, c.driftUnnamed = writers, unnamed
	}
	var wait time.Duration
	switch {
	case drifted && c.level() == (fsm.Enabled{}):
		// Only repairs back off; a delete of what insights-config disables does not.
		now := c.clock.Now()
		c.settleStreak(now)
		c.streak.changed(now, writers, unnamed || len(c.lastDrift) == 0)
		if wait = c.streak.wait(now); wait > 0 {
			c.repairDeferred = true
			break
		}
		c.fireDrift(ctx)
	case drifted:
		c.fireDrift(ctx)
	case gone && !present && c.machine.State() == fsm.StateDeleting:
		c.fire(ctx, fsm.Deleted{}) // our delete went through, though its call failed
	}
	switch {
	case len(c.lastDrift) == 0:
	case wait > 0:
		klog.Infof("DaemonSet %s/%s was %s; repairing it in %s (repair backoff: %d repairs undone since %s)",
			resources.Namespace, resources.DaemonSetName, driftSummary(c.lastDrift, writers, unnamed),
			wait.Round(time.Millisecond), c.streak.repairs, c.streak.first.UTC().Format(time.RFC3339))
	default: // logged after the repair's write: act first, report after
		klog.Infof("DaemonSet %s/%s was %s; acted on it, now %s",
			resources.Namespace, resources.DaemonSetName, driftSummary(c.lastDrift, writers, unnamed), c.machine.State())
	}
}

// fireDrift fires the drift of the DaemonSet the view shows now: Deleted
// when it is gone, else Modified.
func (c *Controller) fireDrift(ctx context.Context) {
	c.repairDeferred = false
	if ds, ok := c.informer.current(); ok {
		c.fire(ctx, fsm.Modified{Generation: ds.Generation})
		return
	}
	c.fire(ctx, fsm.Deleted{})
}

// onStreakDue acts on the repair streak's timer: a deferred repair is made,
// unless insights-config has since disabled the runtime extractor (its
// level was acted on then); a streak whose latest repair stood long enough
// ends.
func (c *Controller) onStreakDue(ctx context.Context) {
	c.settleStreak(c.clock.Now())
	if !c.repairDeferred {
		return
	}
	if c.level() != (fsm.Enabled{}) { // disabled since, or holding: no repair is due
		c.repairDeferred = false
		return
	}
	if c.streak.wait(c.clock.Now()) > 0 {
		return // the timer follows the streak; it fires again when due
	}
	c.fireDrift(ctx)
}

// settleStreak ends a repair streak whose latest repair stood for
// repairQuiet, and says so when that ends a fight.
func (c *Controller) settleStreak(now time.Time) {
	if !c.streak.settle(now) {
		return
	}
	c.fightOver("the latest repair stood for " + repairQuiet.String())
}

// endStreak forgets the streak: Run ends, or there is nothing to repair.
func (c *Controller) endStreak(why string) {
	if c.streak.fight {
		c.fightOver(why)
	}
	c.streak.reset()
	c.repairDeferred = false
}

func (c *Controller) fightOver(why string) {
	klog.Infof("the tug-of-war over DaemonSet %s/%s is over (%s): repairs are immediate again", resources.Namespace, resources.DaemonSetName, why)
	if c.metrics != nil {
		c.metrics.SetConflictingWriter(false)
	}
}

// repairMade counts a repair that wrote in the streak; when that makes a
// fight, it is reported: log, Warning Event, gauge.
func (c *Controller) repairMade(ds *appsv1.DaemonSet) {
	now := c.clock.Now()
	c.settleStreak(now)
	if !c.streak.repaired(now) {
		return
	}
	conds := status.Conditions(c.snapshot())
	msg := v1helpers.FindStatusCondition(conds, status.ConditionDegraded).Message
	klog.Warningf("tug-of-war over DaemonSet %s/%s: %s", resources.Namespace, resources.DaemonSetName, msg)
	c.events.conflict(ds, msg)
	if c.metrics != nil {
		c.metrics.SetConflictingWriter(true)
	}
}

// stuckChanged reports a new stuck verdict, or its end.
func (c *Controller) stuckChanged() {
	stuck := c.rollouts.stuck
	if c.metrics != nil {
		c.metrics.SetRolloutStuck(stuck != nil)
	}
	if stuck == nil {
		klog.Info("the rollout progresses again")
		return
	}
	msg := v1helpers.FindStatusCondition(status.Conditions(c.snapshot()), status.ConditionDegraded).Message
	klog.Warningf("rollout stuck: %s", msg)
	if ds, ok := c.informer.current(); ok {
		c.events.failed(ds, ReasonRolloutStuck, msg)
	}
}

// deletedByUs reports whether this controller deleted object uid.
func (c *Controller) deletedByUs(uid types.UID) bool { return slices.Contains(c.deleted, uid) }

// onRollout fires RolloutComplete for the cached object when its rollout is done.
func (c *Controller) onRollout(ctx context.Context) {
	ds, ok := c.informer.current()
	if !ok || !resources.RolloutOf(ds).Complete() {
		return
	}
	if c.machine.State() == fsm.StateRunning {
		return // nothing to learn: Running+RolloutComplete is a no-op row
	}
	c.fire(ctx, rolloutOf(ds))
}

func rolloutOf(ds *appsv1.DaemonSet) fsm.RolloutComplete {
	return fsm.RolloutComplete{UID: string(ds.UID), Generation: ds.Generation}
}

// fire feeds ev to the machine and carries out the chain of actions and outcomes
// it leads to, then checks the rollout of what was applied: an apply that
// changed nothing produces no watch event, so the cache must be asked.
func (c *Controller) fire(ctx context.Context, ev fsm.Event) {
	if ev == nil || c.holding() {
		return
	}
	var applied *appsv1.DaemonSet
	for ev != nil {
		t, err := c.machine.Fire(ev)
		if err != nil {
			klog.Errorf("state machine: %v", err)
			return
		}
		var obj *appsv1.DaemonSet
		ev, obj = c.execute(ctx, t)
		if obj != nil {
			applied = obj
		}
	}
	if applied != nil {
		if ds, ok := c.informer.current(); ok && ds.UID == applied.UID && ds.Generation == applied.Generation && resources.RolloutOf(ds).Complete() {
			c.fire(ctx, rolloutOf(ds))
		}
	}
}

// execute carries out the action of t and returns its outcome event (nil for
// none) and, after a successful apply, the object applied. The write comes
// first; its Event is recorded after it, asynchronously.
func (c *Controller) execute(ctx context.Context, t fsm.Transition) (fsm.Event, *appsv1.DaemonSet) {
	a := t.Action
	switch a {
	case fsm.ActionApply:
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, actionTimeout)
		res, err := c.apply(actx)
		cancel()
		c.observeAction(a, err, time.Since(start))
		if err != nil {
			on, _ := c.informer.current()
			c.events.failed(on, ReasonApplyFailed, err.Error()+"; retrying with backoff")
			return fsm.ApplyFailed{Err: err}, nil
		}
		repair := applyCause{transition: t}.repair()
		switch {
		case res.Changed:
			cause := applyCause{transition: t, drift: c.driftKinds, upgradeFrom: c.upgradeFrom, version: c.version, reenabled: c.deletedAny, tls: tlsMove(c.applyFrom, &c.applyTo),
				writers: c.driftWriters, unnamed: c.driftUnnamed}
			if repair {
				cause.restored = restoredFields(c.applyFrom, res.Object)
			}
			c.events.applied(res.Object, res.Created, cause.String(res.Created))
			if repair {
				if c.metrics != nil {
					for _, m := range repairManagers(c.driftWriters) {
						c.metrics.ObserveRepair(m)
					}
				}
				c.repairMade(res.Object)
			}
		case repair:
			c.streak.stands(c.clock.Now()) // the other writer put it back itself
		}
		uid := string(res.Object.UID)
		if res.Rolls {
			return fsm.Applied{UID: uid, Generation: res.Generation}, res.Object
		}
		return fsm.AppliedUnchanged{UID: uid, Generation: res.Generation}, res.Object
	case fsm.ActionDelete:
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, actionTimeout)
		deleted, err := c.manager.Delete(actx)
		cancel()
		c.observeAction(a, err, time.Since(start))
		if err != nil {
			on, _ := c.informer.current()
			c.events.failed(on, ReasonDeleteFailed, err.Error()+"; retrying with backoff")
			return fsm.DeleteFailed{Err: err}, nil
		}
		c.endStreak("insights-config disables the runtime extractor") // nothing left to fight over
		if deleted != "" {
			c.rememberDeleted(deleted)
			c.deletedAny = true
			c.events.deleted()
		}
		return fsm.DeleteDone{}, nil
	case fsm.ActionRetry:
		c.scheduleRetry()
	}
	return nil, nil
}

// maxDeleted bounds the memory of own deletes; their events arrive within
// moments, so a few suffice.
const maxDeleted = 4

// rememberDeleted records an own delete: the view hides the object until the
// cache drops it (a quick re-enable must create, not adopt it), and its delete
// event is never drift.
func (c *Controller) rememberDeleted(uid types.UID) {
	c.informer.markGone(uid)
	c.deleted = append(c.deleted, uid)
	if len(c.deleted) > maxDeleted {
		c.deleted = c.deleted[1:]
	}
}

func (c *Controller) apply(ctx context.Context) (resources.Result, error) {
	if c.imagesErr != nil {
		return resources.Result{}, fmt.Errorf("refusing to apply: %w", c.imagesErr)
	}
	d := resources.Desired{Images: *c.images, Version: c.version, TLSProfile: c.tlsProfile}
	if cfg := c.configNotifier.Config(); cfg != nil {
		d.Scheduling = cfg.DataReporting.RuntimeExtractor
	}
	from, _ := c.informer.current()
	c.desiredTLS(&d, from)
	c.applyFrom, c.applyTo = from, d
	return c.manager.Apply(ctx, d)
}

// tlsMove names the TLS profile d moves kube-rbac-proxy to from what ds has
// ("" without ds, or when the arguments stay, in any order).
func tlsMove(ds *appsv1.DaemonSet, d *resources.Desired) string {
	have, ok := resources.KubeRBACProxyTLSArgsOf(ds)
	want := d.TLSArgs()
	if !ok || slices.Equal(slices.Sorted(slices.Values(have)), slices.Sorted(slices.Values(want))) {
		return ""
	}
	name := tlsprofile.Describe(d.TLSProfile)
	if d.KubeRBACProxyTLSArgs != nil {
		name = "kept while unknown"
	}
	for _, arg := range want {
		if strings.HasPrefix(arg, "--tls-min-version=") {
			return name + ", " + arg
		}
	}
	return name
}

// keptTLS is what the DaemonSet's kube-rbac-proxy had when the TLS profile
// became unknown; ok is false when there was nothing to keep.
type keptTLS struct {
	args []string
	ok   bool
}

// desiredTLS completes d's TLS part from the TLS profile source. While the
// source cannot tell the profile, kube-rbac-proxy keeps the arguments the
// DaemonSet had when that began, so that a slow or denied read never rolls
// every node to another profile (and back once read); a drift of them is
// still repaired. Only with nothing to keep is it Intermediate: nothing is
// downgraded then. Each apply meanwhile records a Warning, which the
// recorder aggregates into one Event whose count shows it lasts. ds is the
// DaemonSet now (nil: none).
func (c *Controller) desiredTLS(d *resources.Desired, ds *appsv1.DaemonSet) {
	if c.tls == nil {
		return
	}
	p, err := c.tls.Profile()
	if err == nil {
		if c.tlsKept != nil {
			klog.Infof("cluster TLS profile known again (%s): kube-rbac-proxy follows it", tlsprofile.Describe(p))
			c.tlsKept = nil
		}
		d.TLSProfile = p
		return
	}
	if c.tlsKept == nil {
		var kept keptTLS
		kept.args, kept.ok = resources.KubeRBACProxyTLSArgsOf(ds)
		c.tlsKept = &kept
	}
	msg := err.Error() + "; "
	switch {
	case c.tlsKept.ok && len(c.tlsKept.args) == 0:
		d.KubeRBACProxyTLSArgs = c.tlsKept.args
		msg += "kube-rbac-proxy keeps the DaemonSet's TLS settings (no TLS arguments) until it is read"
	case c.tlsKept.ok:
		d.KubeRBACProxyTLSArgs = c.tlsKept.args
		msg += "kube-rbac-proxy keeps the DaemonSet's TLS arguments (" + strings.Join(c.tlsKept.args, " ") + ") until it is read"
	default:
		d.TLSProfile = nil
		msg += "no DaemonSet TLS arguments to keep: kube-rbac-proxy gets the Intermediate profile until it is read"
	}
	klog.Warning(msg)
	c.events.tlsUnknown(ds, msg)
}

// observeAction counts the action and keeps the failure streak: a success resets
// the backoff (Forget) and cancels a pending retry, which would only re-assert.
func (c *Controller) observeAction(a fsm.Action, err error, d time.Duration) {
	result := "success"
	if err != nil {
		result = "error"
		c.failures++
		c.lastErr = err
	} else {
		c.failures, c.lastErr = 0, nil
		c.limiter.Forget(retryKey)
		c.stopRetry()
		c.retryIn = 0
		if c.metrics != nil {
			c.metrics.SetBackoff(0)
		}
	}
	if c.metrics != nil {
		c.metrics.ObserveAction(a, result, d)
	}
}

func (c *Controller) scheduleRetry() {
	d := c.limiter.When(retryKey)
	c.stopRetry()
	c.retry = time.NewTimer(d)
	c.retryC = c.retry.C
	c.retryIn = d
	if c.metrics != nil {
		c.metrics.SetBackoff(d)
	}
	klog.Infof("retrying in %s after %d failure(s): %v", d.Round(time.Millisecond), c.failures, c.lastErr)
}

func (c *Controller) stopRetry() {
	if c.retry != nil {
		c.retry.Stop()
		c.retry, c.retryC = nil, nil
	}
}

func (c *Controller) observeTransition(t fsm.Transition) {
	if c.metrics != nil {
		c.metrics.ObserveTransition(t)
	}
	if t.Note != "" {
		klog.V(2).Infof("%s on %s: %s", t.From, fsm.Describe(t.Event), t.Note)
	}
	if !t.Changed() {
		klog.V(4).Infof("%s on %s: stays, action %s", t.From, fsm.Describe(t.Event), t.Action)
		return
	}
	klog.Infof("state %s -> %s on %s, action %s", t.From, t.To, fsm.Describe(t.Event), t.Action)
	if t.To == fsm.StateRunning || t.To == fsm.StateDisabled {
		c.driftKinds, c.upgradeFrom = nil, ""
		c.driftWriters, c.driftUnnamed = nil, false
	}
}

// Status returns what the controller knows now: state, target version, the
// DaemonSet's rollout counts, the failure streak and last error, the config
// error. status.Conditions(c.Status()) are the three RuntimeExtractor*
// conditions, for a host's status controller to aggregate. Safe from any
// goroutine. Until Run has synced its caches and made its first observation
// it is the zero Snapshot (State ""), whose conditions are Unknown [Starting].
func (c *Controller) Status() status.Snapshot {
	c.publishedMu.Lock()
	defer c.publishedMu.Unlock()
	return c.published
}

// StatusChanged is notified (coalesced, never blocking the controller) each
// time Status changes. It has one buffered slot: a single consumer reads it
// and then calls Status.
func (c *Controller) StatusChanged() <-chan struct{} { return c.statusChanged }

// report publishes the current snapshot for Status and hands it to the status
// writer, if any (which writes when due, off this goroutine).
func (c *Controller) report() {
	s := c.snapshot()
	c.publishedMu.Lock()
	changed := !s.Equal(c.published)
	c.published = s
	c.publishedMu.Unlock()
	if !changed {
		return
	}
	notify(c.statusChanged)
	if c.metrics != nil {
		reason := ""
		if d := v1helpers.FindStatusCondition(status.Conditions(s), status.ConditionDegraded); d != nil && d.Status == configv1.ConditionTrue {
			reason = d.Reason
		}
		c.metrics.SetDegraded(reason)
	}
	if c.status != nil {
		c.status.offer(s)
	}
}

// snapshot is what the controller knows now. Besides the state and the
// failure streak, it is what the cluster shows, so that the conditions of a
// replica that starts now match those of one that has run all along.
func (c *Controller) snapshot() status.Snapshot {
	s := status.Snapshot{
		State:     c.machine.State(),
		Version:   c.version,
		Failures:  c.failures,
		LastError: c.lastErr,
		RetryIn:   c.retryIn,
		Holding:   c.holding(),
	}
	if ds, ok := c.informer.current(); ok {
		s.Present = true
		s.Desired, s.Updated, s.Available = ds.Status.DesiredNumberScheduled, ds.Status.UpdatedNumberScheduled, ds.Status.NumberAvailable
		s.AppliedVersion = ds.Annotations[resources.VersionAnnotation]
		s.RolledOut = resources.RolloutOf(ds).Complete()
		s.MaxUnavailable = -1
		if n, ok := resources.MaxUnavailable(ds); ok {
			s.MaxUnavailable = n
		}
		s.UnavailableNodes = c.rollouts.unavailableNodes()
		s.UnavailableNodesDenied = c.rollouts.unavailableNodesDenied()
	}
	if r, ok := c.configNotifier.(configErrorReporter); ok {
		s.ConfigError = r.LastError()
	}
	s.Stuck = c.rollouts.stuck
	s.Conflict = c.streak.conflict(c.clock.Now())
	return s
}

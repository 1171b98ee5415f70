package runtimeextractor

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/operator/events"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/metrics"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// Controller keeps the runtime extractor DaemonSet in its desired state. One
// goroutine (Run) owns the state machine: sources only signal it, it turns the
// signals into typed events from what the caches show, fires them, and carries
// out the action each transition names, feeding the outcome back as an event.
// Each job has a room of its own, owned by that goroutine: the front door
// (level signals), the repair gate (repairs and fights), the retrier (failed
// actions), the rollout watch (stuck rollouts).
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

	versions      VersionSource
	tls           TLSProfileSource // nil: tlsProfile, fixed
	images        *resources.Images
	imagesErr     error
	defaultImages bool // an unset RELATED_IMAGE_* selects the default
	metrics       *metrics.Metrics
	status        *statusWriter

	// Timings, and the clock every timer of the loop runs on.
	resync          time.Duration
	rolloutDeadline time.Duration
	degradedInertia time.Duration
	limiter         workqueue.TypedRateLimiter[string]
	repairPolicy    RepairPolicy
	clock           clock.WithTicker

	manager *resources.Manager
	machine *fsm.Machine

	// The rooms, and the rest of what the Run goroutine owns.
	door        *frontDoor
	gate        *repairGate
	retry       *retrier
	rollouts    *rolloutWatch
	expect      loopTimer   // armed while an own write is awaited in the cache
	version     string      // the target version last read
	upgradeFrom string      // the version before the current upgrade, for its Event
	tlsKept     *keptTLS    // while tls cannot tell the profile: what the DaemonSet had
	tlsUnknown  string      // while tls cannot tell the profile: why, and what kube-rbac-proxy gets
	deleted     []types.UID // objects this controller deleted, newest last
	deletedAny  bool        // this controller has deleted the DaemonSet before

	// published is the latest snapshot, for Status; statusChanged signals a
	// new one.
	publishedMu   sync.Mutex
	published     status.Snapshot
	statusChanged chan struct{}
}

// NewRuntimeExtractorController is a constructor for the controller that is in
// charge of the runtime-extractor deployment lifecycle: the seed's arguments,
// then Options for what the original did not have.
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
		configNotifier:  configNotifier,
		updateCh:        updateCh,
		tlsProfile:      tlsProfile,
		kubeClient:      kubeClient,
		recorder:        recorder,
		machine:         fsm.New(fsm.StateDisabled),
		limiter:         defaultRateLimiter(),
		resync:          DefaultResync,
		rolloutDeadline: DefaultRolloutDeadline,
		degradedInertia: DefaultDegradedInertia,
		repairPolicy:    DefaultRepairPolicy(),
		clock:           clock.RealClock{},
		defaultImages:   true,
		statusChanged:   make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(c)
	}
	c.door = newFrontDoor(c.clock)
	c.gate = newRepairGate(c.clock, c.repairPolicy)
	c.retry = newRetrier(c.limiter, c.clock, c.metrics, c.degradedInertia)
	c.rollouts = newRolloutWatch(c.rolloutDeadline, c.clock)
	c.expect = loopTimer{clock: c.clock}
	if c.status != nil {
		c.status.clock = c.clock
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
	if ri.watch != nil {
		ri.watch.setClock(c.clock)
	}
	c.events.recorder = c.eventRecorder
	// library-go's generic DaemonSetCreated/Updated Events are dropped: the
	// controller records its own, saying why (events.go), and logging them
	// dumped a raw Event struct per write.
	c.manager = resources.NewManager(kubeClient, ri.lister, discardRecorder{component: c.component()}, resources.Desired{
		Images: *c.images, TLSProfile: tlsProfile,
	}, resources.WithClock(c.clock))
	ownWrite := c.manager.IsOwnWrite
	ri.ownWrite.Store(&ownWrite)
	if c.metrics != nil {
		c.metrics.SetState(c.machine.State())
	}
	c.machine.OnTransition(c.transitioned)
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
	if c.eventRecorder == nil {
		rec, stop := newEventRecorder(ctx, c.kubeClient, c.component())
		defer stop()
		c.events.recorder = rec
	}
	if !c.waitForCaches(ctx) {
		return
	}
	defer c.stop()
	if c.status != nil {
		statusCtx, stopStatus := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); c.status.run(statusCtx) }()
		defer func() { stopStatus(); <-done }()
	}
	c.start(ctx)
	resync := c.clock.NewTicker(c.resync)
	defer resync.Stop()
	in := loopInputs{config: configHint, version: versionHint, resync: resync.C()}
	for {
		src, payload, ok := receive(ctx, c.loopSources(in))
		if !ok {
			return
		}
		c.handle(ctx, src.wake, payload)
		c.afterWake(ctx)
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

package runtimeextractor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/operator/events"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/metrics"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// Controller keeps the runtime extractor DaemonSet in its desired state. One goroutine (Run)
// owns the state machine; sources only signal it; its decisions are the core's.
type Controller struct {
	cfg      settings       // the seed's arguments and the options, as given
	config   ConfigNotifier // insights-config
	informer *daemonSetInformer
	// Set when the caller's informer is not ours: we run one, and the caller's only hints.
	runOwnInformer func(ctx context.Context)
	hints          <-chan struct{}
	manager        *resources.Manager
	machine        *fsm.Machine
	events         changeEvents
	status         *statusWriter // nil without a status reporter

	// Owned by the Run goroutine.
	core     *core.State
	rollouts *rolloutWatch
	alarm    alarm
	// While the TLS profile source cannot tell the profile: what the DaemonSet had, and why (and
	// what kube-rbac-proxy gets), for status.
	tlsKept    *keptTLS
	tlsUnknown string

	pub publication // the latest snapshot, for Status
}

type publication struct {
	mu       sync.Mutex
	snapshot status.Snapshot
	changed  chan struct{}
}

// NewRuntimeExtractorController has the seed's signature (then Options), so it cannot return
// New's error: it logs it, and Run returns at once.
func NewRuntimeExtractorController(
	configNotifier ConfigNotifier,
	updateCh chan struct{},
	tlsProfile *configv1.TLSSecurityProfile,
	kubeClient kubernetes.Interface,
	recorder events.Recorder,
	resourceInformer ResourceInformer,
	opts ...Option,
) *Controller {
	c, err := New(Args{configNotifier, updateCh, tlsProfile, kubeClient, recorder, resourceInformer}, opts...)
	if err != nil {
		klog.Errorf("runtime extractor controller: %v", err)
		return &Controller{machine: fsm.New(fsm.StateDisabled)} // no parts: Run returns at once
	}
	return c
}

// Args are NewRuntimeExtractorController's arguments, in the seed's order.
type Args struct {
	ConfigNotifier   ConfigNotifier
	UpdateCh         chan struct{}
	TLSProfile       *configv1.TLSSecurityProfile
	KubeClient       kubernetes.Interface
	Recorder         events.Recorder
	ResourceInformer ResourceInformer
}

// New is NewRuntimeExtractorController with its error, for a host that can fail its start.
func New(a Args, opts ...Option) (*Controller, error) {
	switch {
	case a.KubeClient == nil:
		return nil, errors.New("runtime extractor controller: no Kubernetes client")
	case a.ConfigNotifier == nil:
		return nil, errors.New("runtime extractor controller: no ConfigNotifier")
	}
	cfg := defaultSettings()
	cfg.updateCh, cfg.tlsProfile, cfg.kubeClient, cfg.recorder = a.UpdateCh, a.TLSProfile, a.KubeClient, a.Recorder
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.metrics == nil {
		cfg.metrics = metrics.New() // kept, exported nowhere: no nil checks at every observation
	}
	if cfg.images == nil {
		// An invalid image is never applied: every Apply fails with err until it is fixed.
		images, err := resources.ImagesFromEnv(os.Getenv, cfg.defaultImages)
		cfg.images, cfg.imagesErr = &images, err
	}
	state := core.New(cfg.repairPolicy, cfg.degradedInertia)
	c := &Controller{
		cfg:      cfg,
		config:   a.ConfigNotifier,
		machine:  state.Machine(),
		core:     state,
		rollouts: newRolloutWatch(cfg.rolloutDeadline, cfg.nodeNames, cfg.clock, state),
		alarm:    alarm{clock: cfg.clock},
		pub:      publication{changed: make(chan struct{}, 1)},
	}
	if cfg.reporter != nil {
		c.status = &statusWriter{reporter: cfg.reporter, clock: cfg.clock, wake: make(chan struct{}, 1)}
	}
	ri, ok := a.ResourceInformer.(*daemonSetInformer)
	if !ok {
		// A caller's ResourceInformer only says "something changed": keep a cache of our own.
		factory := informers.NewSharedInformerFactoryWithOptions(a.KubeClient, 0, informers.WithNamespace(resources.Namespace))
		own, err := NewResourceInformer(a.Recorder, factory)
		if err != nil {
			return nil, fmt.Errorf("runtime extractor informer: %w", err)
		}
		ri = own
		c.runOwnInformer = func(ctx context.Context) {
			factory.Start(ctx.Done())
			go own.Run(ctx, 1)
		}
		if a.ResourceInformer != nil {
			c.hints = a.ResourceInformer.ResourceModified()
		}
	}
	c.informer = ri
	if ri.watch != nil {
		ri.watch.setClock(cfg.clock)
	}
	c.events.recorder = cfg.eventRecorder
	// library-go's generic DaemonSet Events are dropped: the controller records its own, saying why.
	c.manager = resources.NewManager(a.KubeClient, ri.lister, discardRecorder{component: c.component()},
		resources.Desired{Images: *cfg.images, TLSProfile: a.TLSProfile}, resources.WithClock(cfg.clock))
	cfg.metrics.SetState(c.machine.State())
	c.machine.OnTransition(c.transitioned)
	return c, nil
}

// component names our Events' source after the host.
func (c *Controller) component() string {
	if c.cfg.recorder != nil && c.cfg.recorder.ComponentName() != "" {
		return c.cfg.recorder.ComponentName()
	}
	return "runtime-extractor-controller"
}

// State returns the machine's current state (safe from any goroutine).
func (c *Controller) State() fsm.State { return c.machine.State() }

// relay drains in into a coalescing channel, so no sender waits for the loop; nil gives nil.
func relay(ctx context.Context, wg *sync.WaitGroup, in <-chan struct{}) <-chan struct{} {
	if in == nil {
		return nil
	}
	out := make(chan struct{}, 1)
	wg.Go(func() {
		defer recovered("a relay of the host's notifications")
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
	})
	return out
}

// Manager returns the resource manager (the seed's ResourceManager).
func (c *Controller) Manager() *resources.Manager { return c.manager }

// Run runs the controller until ctx is done and any in-flight action has returned.
func (c *Controller) Run(ctx context.Context) {
	if c.manager == nil {
		return // New failed, and NewRuntimeExtractorController logged why
	}
	if c.runOwnInformer != nil {
		c.runOwnInformer(ctx)
	}
	// The host's sends on updateCh and its config channel may block: drain both from the start.
	configCh, stopConfig := c.config.ConfigChanged()
	defer stopConfig()
	// The relays and the status writer end, and are waited for, when Run returns.
	bgCtx, stopBackground := context.WithCancel(ctx)
	var background sync.WaitGroup
	defer func() { stopBackground(); background.Wait() }()
	configHint := relay(bgCtx, &background, configCh)
	versionHint := relay(bgCtx, &background, c.cfg.updateCh)
	if c.cfg.eventRecorder == nil {
		rec, stop := newEventRecorder(ctx, c.cfg.kubeClient, c.component())
		defer stop()
		c.events.recorder = rec
	}
	synced := []cache.InformerSynced{c.informer.informer.HasSynced, func() bool { return configSynced(c.config) }, c.cfg.versions.HasSynced}
	if c.cfg.tls != nil {
		synced = append(synced, c.cfg.tls.HasSynced)
	}
	if !cache.WaitForNamedCacheSync("RuntimeExtractorController", ctx.Done(), synced...) {
		return
	}
	defer c.step(ctx, core.Input{Kind: core.InputStop})
	if c.status != nil {
		background.Go(func() { defer recovered("the status writer"); c.status.run(bgCtx) })
	}
	if ds, ok := c.informer.current(); ok {
		klog.Infof("observed DaemonSet %s/%s generation %d at version %q", ds.Namespace, ds.Name, ds.Generation, ds.Annotations[resources.VersionAnnotation])
	}
	klog.Infof("runtime extractor controller started: target version %q", c.cfg.versions.Version())
	func() { defer recovered("the control loop's start"); c.step(ctx, core.Input{Kind: core.InputStart}) }()
	resync := c.cfg.clock.NewTicker(c.cfg.resync)
	defer resync.Stop()
	in := loopInputs{config: configHint, version: versionHint, resync: resync.C()}
	for {
		w, payload, ok := c.receive(ctx, in)
		if !ok {
			return
		}
		func() { // a panic ends the wake-up, not the loop
			defer recovered("the control loop")
			c.handle(ctx, w, payload)
		}()
	}
}

// recovered ends and logs, with its stack, a panic on one of our goroutines (what names it): a bug
// of ours must not take the host's process down, as HandleCrash would; a later wake-up redoes it.
func recovered(what string) {
	if r := recover(); r != nil {
		klog.Errorf("runtime extractor: recovered from a panic in %s: %v\n%s", what, r, debug.Stack())
	}
}

// retryKey is the rate limiter's only item: the controller manages one object.
const retryKey = "runtime-extractor"

// ownInput: err is of our own input (an unset or invalid RELATED_IMAGE_*), which no retry fixes.
func ownInput(err error) bool {
	return errors.Is(err, resources.ErrImagesUnset) || errors.Is(err, resources.ErrInvalidImage)
}

// record counts an action's outcome, with a Warning for a failure; a success resets the backoff
// (the core cancelled the pending retry).
func (c *Controller) record(a fsm.Action, err error, took time.Duration) {
	result := "success"
	if err != nil {
		result = "error"
		reason := ReasonApplyFailed
		if a == fsm.ActionDelete {
			reason = ReasonDeleteFailed
		}
		on, _ := c.informer.current()
		c.events.failed(on, reason, err.Error()+"; retrying with backoff")
	} else {
		c.cfg.limiter.Forget(retryKey)
		c.cfg.metrics.SetBackoff(0) // no retry pending
	}
	c.cfg.metrics.ObserveAction(a, result, took)
}

package runtimeextractor

import (
	"math/rand/v2"
	"os"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/operator/events"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/metrics"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/version"
)

// The controller's timing: the defaults hosts and tests derive their waits from.
const (
	// DefaultResync is how often the controller re-asserts the level when nothing happens.
	DefaultResync = 10 * time.Minute
	// DefaultRetryBase and DefaultRetryMax bound the exponential retry backoff.
	DefaultRetryBase = 100 * time.Millisecond
	DefaultRetryMax  = 5 * time.Minute
	// DefaultRolloutDeadline is how long a rollout may make no progress before it is reported stuck.
	DefaultRolloutDeadline = 10 * time.Minute
	// DefaultDegradedInertia is how long an apply or delete must keep failing before Degraded: the
	// ClusterOperator contract wants none in an upgrade, when kube-apiservers restart for tens of seconds.
	DefaultDegradedInertia = 2 * time.Minute
	// StatusSettle is how long a status snapshot must stay unchanged to be written: a quick repair writes nothing.
	StatusSettle = 2 * time.Second
	// StatusMaxDelay bounds a change's wait and spaces writes; a rollout waits it out: a repair within it writes nothing.
	StatusMaxDelay = 5 * time.Second
	// actionTimeout: a hung request becomes a failure, retried, instead of stalling the loop.
	actionTimeout = 30 * time.Second
	statusTimeout = 10 * time.Second
	statusRetry   = 5 * time.Second
)

// VersionSource reports the cluster's target release version; version.Source implements it.
type VersionSource interface {
	Version() string
	Changed() <-chan struct{}
	// HasSynced: the source's cache has synced (Run waits for it).
	HasSynced() bool
}

// TLSProfileSource reports the cluster's TLS security profile; tlsprofile.Source implements it.
type TLSProfileSource interface {
	// Profile returns the profile (nil means Intermediate), or why it is unknown.
	Profile() (*configv1.TLSSecurityProfile, error)
	// Changed signals (coalesced, never blocking) that Profile's answer changed.
	Changed() <-chan struct{}
	HasSynced() bool
}

// Option configures the controller beyond the seed's constructor arguments.
type Option func(*settings)

// settings never change once the constructor has built the parts from them.
type settings struct {
	updateCh        chan struct{}
	tlsProfile      *configv1.TLSSecurityProfile
	kubeClient      kubernetes.Interface
	recorder        events.Recorder // the host's; names our Events' source component
	eventRecorder   record.EventRecorder
	reporter        *status.Reporter
	versions        VersionSource
	tls             TLSProfileSource // nil: tlsProfile, fixed
	images          *resources.Images
	imagesErr       error
	defaultImages   bool // an unset RELATED_IMAGE_* selects the default
	nodeNames       bool // pods are listed to name the nodes without an available pod
	metrics         *metrics.Metrics
	resync          time.Duration
	rolloutDeadline time.Duration
	degradedInertia time.Duration
	limiter         workqueue.TypedRateLimiter[string]
	repairPolicy    RepairPolicy
	clock           clock.WithTicker
}

func defaultSettings() settings {
	return settings{
		versions:        envVersion{},
		defaultImages:   true,
		nodeNames:       true,
		resync:          DefaultResync,
		rolloutDeadline: DefaultRolloutDeadline,
		degradedInertia: DefaultDegradedInertia,
		limiter:         defaultRateLimiter(),
		repairPolicy:    DefaultRepairPolicy(),
		clock:           clock.RealClock{},
	}
}

// WithResync sets the period of the level re-assert (default 10 minutes).
func WithResync(d time.Duration) Option { return func(s *settings) { s.resync = d } }

// WithRateLimiter replaces the retry backoff (default: exponential from 100 ms to 5 min, with jitter).
func WithRateLimiter(l workqueue.TypedRateLimiter[string]) Option {
	return func(s *settings) { s.limiter = l }
}

// WithVersionSource follows src (e.g. the ClusterVersion), not RELEASE_VERSION on updateCh.
func WithVersionSource(src VersionSource) Option { return func(s *settings) { s.versions = src } }

// WithTLSProfileSource follows src, not the constructor's tlsProfile. While src cannot tell it, kube-rbac-proxy keeps
// its TLS arguments if a predefined profile's or ours (else Intermediate); each apply records a ReasonTLSProfileUnknown.
func WithTLSProfileSource(src TLSProfileSource) Option { return func(s *settings) { s.tls = src } }

// WithImages sets the container images (default: resources.ImagesFromEnv).
func WithImages(images resources.Images) Option { return func(s *settings) { s.images = &images } }

// WithDefaultImages: an unset RELATED_IMAGE_* selects the default image (default) or fails each apply (not WithImages).
func WithDefaultImages(allowed bool) Option { return func(s *settings) { s.defaultImages = allowed } }

// WithNodeNames: the status names the nodes without an available pod (the default; RBAC: list pods), or gives counts.
func WithNodeNames(named bool) Option { return func(s *settings) { s.nodeNames = named } }

// RepairPolicy is the repair gate's rules (core.Policy).
type RepairPolicy = core.Policy

// DefaultRepairPolicy is core.DefaultPolicy: 6 repairs at once, one more a minute.
func DefaultRepairPolicy() RepairPolicy { return core.DefaultPolicy() }

// WithRepairPolicy sets the repair gate's rules; a policy that is not Valid leaves the default.
func WithRepairPolicy(p RepairPolicy) Option {
	return func(s *settings) {
		if p.Valid() {
			s.repairPolicy = p
		}
	}
}

// WithClock runs everything the controller times on clk; the API calls' timeouts are wall time.
func WithClock(clk clock.WithTicker) Option { return func(s *settings) { s.clock = clk } }

// WithMetrics reports the controller's metrics on m (without it, they are exported nowhere).
func WithMetrics(m *metrics.Metrics) Option { return func(s *settings) { s.metrics = m } }

// WithRolloutDeadline sets how long a rollout may make no progress before it is reported stuck.
func WithRolloutDeadline(d time.Duration) Option { return func(s *settings) { s.rolloutDeadline = d } }

// WithDegradedInertia sets how long an apply or delete must fail before Degraded (one no retry fixes: at once).
func WithDegradedInertia(d time.Duration) Option { return func(s *settings) { s.degradedInertia = d } }

// WithEventRecorder records the controller's Events through r instead of a broadcaster of its own.
func WithEventRecorder(r record.EventRecorder) Option {
	return func(s *settings) { s.eventRecorder = r }
}

// WithStatusReporter reports the RuntimeExtractor* conditions through r.
func WithStatusReporter(r *status.Reporter) Option { return func(s *settings) { s.reporter = r } }

// jitteredExponential adds up to 10% jitter, so controllers failing together do not retry in lockstep.
type jitteredExponential struct {
	workqueue.TypedRateLimiter[string]
}

func (j jitteredExponential) When(item string) time.Duration {
	d := j.TypedRateLimiter.When(item)
	return d + time.Duration(float64(d)*0.1*rand.Float64())
}

func defaultRateLimiter() workqueue.TypedRateLimiter[string] {
	return jitteredExponential{workqueue.NewTypedItemExponentialFailureRateLimiter[string](DefaultRetryBase, DefaultRetryMax)}
}

// envVersion reads RELEASE_VERSION whenever asked (on the seed's updateCh); it never signals.
type envVersion struct{}

func (envVersion) Version() string          { return os.Getenv(version.EnvReleaseVersion) }
func (envVersion) Changed() <-chan struct{} { return nil }
func (envVersion) HasSynced() bool          { return true }

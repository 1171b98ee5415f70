package runtimeextractor

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/operator/resource/resourceapply"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/internal/testwait"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// settableTLS is a TLSProfileSource the test moves by hand. It counts the
// controller's reads, so a test knows a signal was acted on.
type settableTLS struct {
	mu      sync.Mutex
	p       *configv1.TLSSecurityProfile
	err     error
	synced  bool
	changed chan struct{}
	reads   atomic.Int32
}

func newSettableTLS(p *configv1.TLSSecurityProfile, err error) *settableTLS {
	return &settableTLS{p: p, err: err, synced: true, changed: make(chan struct{}, 1)}
}

func (s *settableTLS) Profile() (*configv1.TLSSecurityProfile, error) {
	s.reads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p, s.err
}

func (s *settableTLS) Changed() <-chan struct{} { return s.changed }

func (s *settableTLS) HasSynced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}

func (s *settableTLS) set(p *configv1.TLSSecurityProfile, err error) {
	s.mu.Lock()
	s.p, s.err, s.synced = p, err, true
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

var (
	modernProfile = &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType, Modern: &configv1.ModernTLSProfile{}}
	errUnreadable = errors.New(`the cluster TLS profile is unknown: apiservers.config.openshift.io "cluster" is forbidden`)
)

func withTLS(src TLSProfileSource) func(*harness) {
	return func(h *harness) { h.opts = append(h.opts, WithTLSProfileSource(src)) }
}

func proxyTLSArgs(t *testing.T, ds *appsv1.DaemonSet) []string {
	t.Helper()
	args, ok := resources.KubeRBACProxyTLSArgsOf(ds)
	if !ok {
		t.Fatalf("the DaemonSet has no kube-rbac-proxy TLS arguments to read")
	}
	return args
}

// daemonSetWrites counts the controller's DaemonSet creates and updates.
func (h *harness) daemonSetWrites() int {
	n := 0
	for _, a := range h.api.Client.Actions() {
		if a.GetResource().Resource == "daemonsets" && a.GetSubresource() == "" && (a.GetVerb() == "create" || a.GetVerb() == "update") {
			n++
		}
	}
	return n
}

// signalTLS moves the source and waits until the controller has read it.
func (h *harness) signalTLS(src *settableTLS, p *configv1.TLSSecurityProfile, err error) {
	h.t.Helper()
	n := src.reads.Load()
	src.set(p, err)
	h.eventually("the controller to read the TLS profile", func() bool { return src.reads.Load() > n })
}

// TestTLSProfileChangeRollsOnce: a profile change re-asserts the level: one
// update, one new generation, its Event naming the profile; the same profile
// signalled again writes nothing.
func TestTLSProfileChangeRollsOnce(t *testing.T) {
	src := newSettableTLS(nil, nil)
	h := startWith(t, withTLS(src))
	h.rollOut()
	h.waitState(fsm.StateRunning)
	before := h.stored()
	if got := proxyTLSArgs(t, before); !slices.Equal(got, resources.KubeRBACProxyTLSArgs(nil)) {
		t.Fatalf("deployed with %q, want Intermediate's", got)
	}
	writes := h.daemonSetWrites()

	h.signalTLS(src, modernProfile, nil)
	after := h.waitStored("Modern's arguments", func(ds *appsv1.DaemonSet) bool {
		args, _ := resources.KubeRBACProxyTLSArgsOf(ds)
		return slices.Equal(args, []string{"--tls-min-version=VersionTLS13"})
	})
	h.rollOut()
	h.waitState(fsm.StateRunning)
	h.signalTLS(src, modernProfile, nil) // the same again
	h.waitState(fsm.StateRunning)
	if got := h.daemonSetWrites() - writes; got != 1 || h.stored().Generation != before.Generation+1 || after.Generation != before.Generation+1 {
		t.Fatalf("%d writes, generation %d -> %d; want 1 write, one generation", got, before.Generation, h.stored().Generation)
	}
	updated := h.changes.with(ReasonUpdated)
	if len(updated) != 1 || !strings.Contains(updated[0].text, "follows the cluster TLS profile: Modern, --tls-min-version=VersionTLS13") {
		t.Fatalf("Updated Events %+v, want one naming the Modern profile", updated)
	}
	t.Logf("Event: %s", updated[0].text)
}

// TestUnknownTLSProfileKeepsTheDaemonSetsArguments: a DaemonSet deployed at
// Modern, then a controller that cannot read the profile: nothing changes,
// a Warning says why; a drift of the arguments is repaired back to the kept
// ones; once read (Modern), nothing is written.
func TestUnknownTLSProfileKeepsTheDaemonSetsArguments(t *testing.T) {
	existing := deployedAt(t, modernProfile)

	src := newSettableTLS(nil, errUnreadable)
	h := startWith(t, withTLS(src), existing)
	h.waitState(fsm.StateRunning)
	if cur := h.stored(); cur.Generation != existing.Generation || !slices.Equal(proxyTLSArgs(t, cur), []string{"--tls-min-version=VersionTLS13"}) {
		t.Fatalf("generation %d -> %d, args %q; want the DaemonSet unchanged", existing.Generation, cur.Generation, proxyTLSArgs(t, cur))
	}
	warnings := h.changes.with(ReasonTLSProfileUnknown)
	if len(warnings) == 0 || warnings[0].eventType != corev1.EventTypeWarning || warnings[0].object == nil || warnings[0].object.Kind != "DaemonSet" ||
		!strings.Contains(warnings[0].text, "forbidden") || !strings.Contains(warnings[0].text, "keeps the DaemonSet's TLS arguments (--tls-min-version=VersionTLS13)") {
		t.Fatalf("TLS Warnings %+v, want one on the DaemonSet saying forbidden and what is kept", warnings)
	}
	t.Logf("Warning: %s", warnings[0].text)
	// Status says so too, for as long as it lasts. It is published after the
	// wake-up whose transition waitState saw, so it is waited for.
	testwait.For(t, "Available to say the TLS profile is unknown and what is kept", func() bool {
		msg := status.Conditions(h.ctrl.Status())[0].Message
		return strings.Contains(msg, "the cluster TLS profile is unknown") && strings.Contains(msg, "keeps the DaemonSet's TLS arguments (--tls-min-version=VersionTLS13)")
	})

	// Someone changes the arguments meanwhile: repaired to the kept ones.
	drifted := h.stored().DeepCopy()
	for i := range drifted.Spec.Template.Spec.Containers {
		if c := &drifted.Spec.Template.Spec.Containers[i]; c.Name == resources.ContainerKubeRBACProxy {
			c.Args = slices.DeleteFunc(c.Args, func(a string) bool {
				return strings.HasPrefix(a, "--tls-") && !strings.HasPrefix(a, "--tls-cert") && !strings.HasPrefix(a, "--tls-private")
			})
			c.Args = append(c.Args, "--tls-min-version=VersionTLS10")
		}
	}
	if _, err := h.api.Update(drifted); err != nil {
		t.Fatal(err)
	}
	h.waitStored("the kept arguments back", func(ds *appsv1.DaemonSet) bool {
		args, _ := resources.KubeRBACProxyTLSArgsOf(ds)
		return slices.Equal(args, []string{"--tls-min-version=VersionTLS13"})
	})
	h.rollOut()
	h.waitState(fsm.StateRunning)

	// Read at last, and it is what the DaemonSet has: no write.
	writes, gen := h.daemonSetWrites(), h.stored().Generation
	h.signalTLS(src, modernProfile, nil)
	h.waitState(fsm.StateRunning)
	if h.daemonSetWrites() != writes || h.stored().Generation != gen {
		t.Fatalf("the profile read as the DaemonSet has it wrote %d times", h.daemonSetWrites()-writes)
	}
	h.eventually("status to stop saying the TLS profile is unknown", func() bool {
		return h.ctrl.Status().TLSProfileUnknown == "" && !strings.Contains(status.Conditions(h.ctrl.Status())[0].Message, "TLS profile")
	})
}

// TestUnknownTLSProfileWithoutDaemonSetDeploysIntermediate: nothing to keep,
// nothing to downgrade: Intermediate, a Warning on the Namespace; the profile
// read later (Modern) rolls once.
func TestUnknownTLSProfileWithoutDaemonSetDeploysIntermediate(t *testing.T) {
	src := newSettableTLS(nil, errUnreadable)
	h := startWith(t, withTLS(src))
	ds := h.waitStored("the DaemonSet", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	if got := proxyTLSArgs(t, ds); !slices.Equal(got, resources.KubeRBACProxyTLSArgs(nil)) {
		t.Fatalf("deployed with %q, want Intermediate's", got)
	}
	warnings := h.changes.with(ReasonTLSProfileUnknown)
	if len(warnings) != 1 || warnings[0].object.Kind != "Namespace" || !strings.Contains(warnings[0].text, "Intermediate") {
		t.Fatalf("TLS Warnings %+v, want one on the Namespace naming Intermediate", warnings)
	}
	h.rollOut()
	h.waitState(fsm.StateRunning)
	gen := h.stored().Generation
	h.signalTLS(src, modernProfile, nil)
	h.waitStored("Modern's arguments", func(ds *appsv1.DaemonSet) bool {
		return slices.Equal(proxyTLSArgs(t, ds), []string{"--tls-min-version=VersionTLS13"})
	})
	h.rollOut()
	h.waitState(fsm.StateRunning)
	if got := h.stored().Generation; got != gen+1 {
		t.Fatalf("generation %d -> %d, want one rollout", gen, got)
	}
}

// TestUnknownTLSProfileKeepsNoArguments: a DaemonSet this controller wrote
// with no TLS arguments for kube-rbac-proxy (its own defaults) keeps none;
// one it did not write (no spec-hash of its own) gets Intermediate's.
func TestUnknownTLSProfileKeepsNoArguments(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wrote bool
		want  []string
	}{
		{"written by the controller", true, []string{}},
		{"written by someone else", false, resources.KubeRBACProxyTLSArgs(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := resources.DesiredDaemonSet(resources.Desired{Images: resources.DefaultImages(), KubeRBACProxyTLSArgs: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			if tc.wrote {
				if err := resourceapply.SetSpecHashAnnotation(&ds.ObjectMeta, ds.Spec); err != nil {
					t.Fatal(err)
				}
			}
			h := startWith(t, withTLS(newSettableTLS(nil, errUnreadable)), ds)
			uid := h.waitStored("the DaemonSet", func(ds *appsv1.DaemonSet) bool { return ds != nil }).UID
			h.eventually("the first apply to adopt the DaemonSet", func() bool {
				ds := h.stored()
				return ds.UID == uid && h.ctrl.manager.IsOwnWrite(uid, ds.Generation)
			})
			if args := proxyTLSArgs(t, h.stored()); !slices.Equal(args, tc.want) {
				t.Fatalf("args %q; want %q", args, tc.want)
			}
			if gen := h.stored().Generation; tc.wrote && gen != 1 {
				t.Fatalf("generation %d; want 1: nothing to change", gen)
			}
		})
	}
}

// TestStartWaitsForTheTLSProfileSource: nothing is applied before the
// source has synced, so a first deploy gets the profile, not a default
// rolled over a moment later.
func TestStartWaitsForTheTLSProfileSource(t *testing.T) {
	src := newSettableTLS(modernProfile, nil)
	src.synced = false
	h := startWith(t, withTLS(src))
	h.eventually("the controller to wait for its caches", func() bool { return h.ctrl.informer.informer.HasSynced() })
	if src.reads.Load() != 0 || h.stored() != nil {
		t.Fatal("the controller acted before the TLS profile source synced")
	}
	src.mu.Lock()
	src.synced = true
	src.mu.Unlock()
	ds := h.waitStored("the DaemonSet", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	if got := proxyTLSArgs(t, ds); !slices.Equal(got, []string{"--tls-min-version=VersionTLS13"}) {
		t.Fatalf("deployed with %q, want Modern's", got)
	}
}

// tamperTLS replaces ds's kube-rbac-proxy TLS arguments with args, as an
// edit made while the controller is down would.
func tamperTLS(ds *appsv1.DaemonSet, args ...string) *appsv1.DaemonSet {
	ds = ds.DeepCopy()
	for i := range ds.Spec.Template.Spec.Containers {
		if c := &ds.Spec.Template.Spec.Containers[i]; c.Name == resources.ContainerKubeRBACProxy {
			c.Args = slices.DeleteFunc(c.Args, func(a string) bool {
				return strings.HasPrefix(a, "--tls-min-version=") || strings.HasPrefix(a, "--tls-cipher-suites=")
			})
			c.Args = append(c.Args, args...)
		}
	}
	return ds
}

// weakTLSArgs are arguments library-go's crypto accepts, and no predefined
// profile has: TLS 1.0 and an RC4 suite.
var weakTLSArgs = []string{"--tls-min-version=VersionTLS10", "--tls-cipher-suites=TLS_RSA_WITH_RC4_128_SHA"}

// Issue 26, defect 4: TLS arguments someone else set while the controller
// was down are not kept when the profile cannot be read at the start: they
// are neither a predefined profile's nor this controller's (the spec-hash
// annotation is that of the spec it wrote), so kube-rbac-proxy gets
// Intermediate, a Warning saying so; a later edit is repaired to
// Intermediate, not to the tampered arguments.
func TestUnknownTLSProfileReplacesTamperedArguments(t *testing.T) {
	existing := tamperTLS(deployedAt(t, nil), weakTLSArgs...)

	h := startWith(t, withTLS(newSettableTLS(nil, errUnreadable)), existing)
	intermediate := resources.KubeRBACProxyTLSArgs(nil)
	h.waitStored("Intermediate's arguments", func(ds *appsv1.DaemonSet) bool {
		return slices.Equal(proxyTLSArgs(t, ds), intermediate)
	})
	warnings := h.changes.with(ReasonTLSProfileUnknown)
	if len(warnings) == 0 || !strings.Contains(warnings[0].text, "the cluster TLS profile is unknown") ||
		!strings.Contains(warnings[0].text, "neither a predefined profile's nor this controller's") ||
		!strings.Contains(warnings[0].text, "kube-rbac-proxy gets the Intermediate profile until it is read") {
		t.Fatalf("TLS Warnings %+v, want one saying the profile is unknown and the arguments were replaced by Intermediate's", warnings)
	}
	t.Logf("Warning: %s", warnings[0].text)
	h.rollOut()
	h.waitState(fsm.StateRunning)

	if _, err := h.api.Update(tamperTLS(h.stored(), weakTLSArgs...)); err != nil {
		t.Fatal(err)
	}
	h.waitStored("Intermediate's arguments back", func(ds *appsv1.DaemonSet) bool {
		return slices.Equal(proxyTLSArgs(t, ds), intermediate)
	})
}

// Arguments this controller wrote (a Custom profile's) are kept while the
// profile is unknown at the start: the spec-hash annotation matches.
func TestUnknownTLSProfileKeepsArgumentsItWrote(t *testing.T) {
	custom := &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType, Custom: &configv1.CustomTLSProfile{
		TLSProfileSpec: configv1.TLSProfileSpec{MinTLSVersion: configv1.VersionTLS12, Ciphers: []string{"ECDHE-ECDSA-AES128-GCM-SHA256"}},
	}}
	existing := deployedAt(t, custom)
	want := proxyTLSArgs(t, existing)
	if resources.PredefinedTLSArgs(want) {
		t.Fatalf("the Custom profile's arguments %q are a predefined profile's", want)
	}

	h := startWith(t, withTLS(newSettableTLS(nil, errUnreadable)), existing)
	h.waitState(fsm.StateRunning)
	if cur := h.stored(); cur.Generation != 1 || !slices.Equal(proxyTLSArgs(t, cur), want) {
		t.Fatalf("generation %d, args %q; want the DaemonSet unchanged", cur.Generation, proxyTLSArgs(t, cur))
	}
	if w := h.changes.with(ReasonTLSProfileUnknown); len(w) == 0 || !strings.Contains(w[0].text, "keeps the DaemonSet's TLS arguments ("+strings.Join(want, " ")+")") {
		t.Fatalf("TLS Warnings %+v, want one saying what is kept", w)
	}
}

// deployedAt is the DaemonSet a controller that read TLS profile p (nil:
// unset) deployed and rolled out, that controller stopped since.
func deployedAt(t *testing.T, p *configv1.TLSSecurityProfile) *appsv1.DaemonSet {
	t.Helper()
	first := startWith(t, withTLS(newSettableTLS(p, nil)))
	first.rollOut()
	first.waitState(fsm.StateRunning)
	existing := first.stored()
	first.stop()
	return existing
}

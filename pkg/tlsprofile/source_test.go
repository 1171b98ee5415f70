package tlsprofile

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configfake "github.com/openshift/client-go/config/clientset/versioned/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/insights-runtime-extractor/controller/internal/testwait"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
)

// apiServerAPI is the resource a cluster's discovery lists when it serves
// APIServer.
var apiServerAPI = metav1.APIResource{Name: "apiservers", Kind: "APIServer"}

var (
	modern       = &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType, Modern: &configv1.ModernTLSProfile{}}
	intermediate = &configv1.TLSSecurityProfile{Type: configv1.TLSProfileIntermediateType, Intermediate: &configv1.IntermediateTLSProfile{}}
)

func apiServer(p *configv1.TLSSecurityProfile) *configv1.APIServer {
	return &configv1.APIServer{
		ObjectMeta: metav1.ObjectMeta{Name: APIServerName},
		Spec:       configv1.APIServerSpec{TLSSecurityProfile: p},
	}
}

// run runs s until the test ends.
func run(t *testing.T, s *Source) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func newTestSource(t *testing.T, client *configfake.Clientset, clk clock.WithDelayedExecution) *Source {
	t.Helper()
	s, err := NewSource(fakeapi.ConfigDiscovery(apiServerAPI), client)
	if err != nil {
		t.Fatal(err)
	}
	s.clock = clk
	return s
}

// expectSignal waits up to testwait.Patience for Changed to signal.
func expectSignal(t *testing.T, s *Source, when string) {
	t.Helper()
	select {
	case <-s.Changed():
	case <-time.After(testwait.Patience):
		t.Fatalf("no signal %s", when)
	}
}

func noSignal(t *testing.T, s *Source, when string) {
	t.Helper()
	select {
	case <-s.Changed():
		t.Errorf("Changed signalled %s", when)
	default:
	}
}

// TestWithoutTheAPIServerAPIIntermediateIsKnown: a cluster that is not
// OpenShift has no profile to follow; the answer is known at once.
func TestWithoutTheAPIServerAPIIntermediateIsKnown(t *testing.T) {
	s, err := NewSource(fakeapi.ConfigDiscovery(), configfake.NewClientset())
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Profile()
	if !s.HasSynced() || p != nil || err != nil {
		t.Fatalf("synced=%v profile=%v err=%v, want synced, nil (Intermediate), no error", s.HasSynced(), p, err)
	}
}

// TestDiscoveryErrorIsReturned: a failed discovery is not taken for "no API".
func TestDiscoveryErrorIsReturned(t *testing.T) {
	d := fakeapi.ConfigDiscovery(apiServerAPI)
	d.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	if _, err := NewSource(d, configfake.NewClientset()); err == nil {
		t.Fatal("NewSource succeeded on a failed discovery")
	}
}

// TestFollowsTheProfileAndSignalsOnlyItsChanges: the listed profile is known
// without a signal (nobody read another answer); a change of the profile
// signals once; a change elsewhere in the object, or the same profile, none.
func TestFollowsTheProfileAndSignalsOnlyItsChanges(t *testing.T) {
	client := configfake.NewClientset(apiServer(intermediate))
	watching := fakeapi.WatchStarted(client, "apiservers")
	s := newTestSource(t, client, clock.RealClock{})
	if s.HasSynced() {
		t.Fatal("synced before Run")
	}
	if _, err := s.Profile(); !errors.Is(err, ErrUnknown) {
		t.Fatalf("Profile before Run: err=%v, want ErrUnknown", err)
	}
	run(t, s)
	testwait.For(t, "the first read", s.HasSynced)
	testwait.For(t, "the watch to start", fakeapi.Closed(watching))
	if p, err := s.Profile(); err != nil || p.Type != configv1.TLSProfileIntermediateType {
		t.Fatalf("Profile = %v, %v; want Intermediate", p, err)
	}
	noSignal(t, s, "for the first read")

	ctx := context.Background()
	api, err := client.ConfigV1().APIServers().Get(ctx, APIServerName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	api.Spec.TLSSecurityProfile = modern
	if _, err := client.ConfigV1().APIServers().Update(ctx, api, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expectSignal(t, s, "for Intermediate -> Modern")
	if p, err := s.Profile(); err != nil || p.Type != configv1.TLSProfileModernType {
		t.Fatalf("Profile = %v, %v; want Modern", p, err)
	}

	// Another field, then the same profile written again: no signal. The
	// audit change is waited for through the cache, so it was handled.
	api.Spec.Audit.Profile = configv1.WriteRequestBodiesAuditProfileType
	if _, err := client.ConfigV1().APIServers().Update(ctx, api, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the audit change in the cache", func() bool {
		obj, ok, _ := s.informer.GetStore().GetByKey(APIServerName)
		return ok && obj.(*configv1.APIServer).Spec.Audit.Profile == configv1.WriteRequestBodiesAuditProfileType
	})
	noSignal(t, s, "for a change that is not the profile's")

	// Deleted: no object means Intermediate (nil), known.
	if err := client.ConfigV1().APIServers().Delete(ctx, APIServerName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectSignal(t, s, "for the deletion")
	if p, err := s.Profile(); err != nil || p != nil {
		t.Fatalf("Profile after deletion = %v, %v; want nil (Intermediate), known", p, err)
	}
}

// TestNoObjectIsIntermediate: a listed absence is a known answer.
func TestNoObjectIsIntermediate(t *testing.T) {
	s := newTestSource(t, configfake.NewClientset(), clock.RealClock{})
	run(t, s)
	testwait.For(t, "the first read", s.HasSynced)
	if p, err := s.Profile(); err != nil || p != nil {
		t.Fatalf("Profile = %v, %v; want nil (Intermediate), known", p, err)
	}
}

// TestUnreadableIsUnknownAndGivesUpWaitingAfterStartTimeout: a denied read
// leaves the profile unknown, saying why; HasSynced turns true only once
// StartTimeout has passed (a fake clock stepped, not waited for). When the
// read succeeds later, the profile is known and Changed signals it.
func TestUnreadableIsUnknownAndGivesUpWaitingAfterStartTimeout(t *testing.T) {
	client := configfake.NewClientset(apiServer(modern))
	var denied atomic.Bool
	denied.Store(true)
	var denials atomic.Int32
	deny := func(clienttesting.Action) (bool, runtime.Object, error) {
		if !denied.Load() {
			return false, nil, nil
		}
		denials.Add(1)
		return true, nil, apierrors.NewForbidden(configv1.Resource("apiservers"), "", errors.New("no RBAC rule"))
	}
	client.PrependReactor("list", "apiservers", deny)
	client.PrependWatchReactor("apiservers", func(a clienttesting.Action) (bool, watch.Interface, error) {
		handled, _, err := deny(a)
		return handled, nil, err
	})
	clk := clocktesting.NewFakeClock(time.Now())
	s := newTestSource(t, client, clk)
	run(t, s)

	testwait.For(t, "a denied read", func() bool { return denials.Load() > 0 })
	testwait.For(t, "the give-up timer", clk.HasWaiters)
	if s.HasSynced() {
		t.Fatal("synced with the read denied, before StartTimeout")
	}
	clk.Step(StartTimeout - time.Millisecond)
	if s.HasSynced() {
		t.Fatal("synced before StartTimeout")
	}
	clk.Step(time.Millisecond)
	testwait.For(t, "HasSynced after StartTimeout", s.HasSynced)
	p, err := s.Profile()
	if !errors.Is(err, ErrUnknown) || p != nil {
		t.Fatalf("Profile = %v, %v; want unknown", p, err)
	}
	testwait.For(t, "the denial in the error", func() bool {
		_, err := s.Profile()
		return strings.Contains(err.Error(), "forbidden") && strings.Contains(err.Error(), "within "+StartTimeout.String())
	})
	_, err = s.Profile()
	t.Logf("unknown: %v", err)
	noSignal(t, s, "while the profile stayed unknown")

	denied.Store(false) // the reflector's next list, after its backoff, succeeds
	expectSignal(t, s, "once the profile was read")
	if p, err := s.Profile(); err != nil || p.Type != configv1.TLSProfileModernType {
		t.Fatalf("Profile = %v, %v; want Modern", p, err)
	}
}

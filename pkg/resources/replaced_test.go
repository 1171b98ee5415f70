package resources

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestRestoredFieldsNameWhatARepairPutBack(t *testing.T) {
	desired, err := DesiredDaemonSet(Desired{Images: DefaultImages(), Version: "4.22.0"})
	if err != nil {
		t.Fatal(err)
	}
	desired.UID = "uid-1"
	restored := func(_ *testing.T, before, desired *appsv1.DaemonSet) []string { return restoredFields(before, desired) }
	testChanges(t, desired, "restoredFields", restored, []changeCase{
		{"nothing", func(*appsv1.DaemonSet) {}, nil},
		{"image", func(ds *appsv1.DaemonSet) {
			findContainer(&ds.Spec.Template.Spec, ContainerExtractor).Image = "quay.io/x:1"
		}, []string{"container extractor image"}},
		{"sidecar", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar\u202e", Image: "x"})
		}, []string{"removed container sidecar?"}},
		{"long sidecar name", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, corev1.Container{Name: strings.Repeat("s", 100), Image: "x"})
		}, []string{"removed container " + strings.Repeat("s", MaxNameBytes)}},
		{"toleration and minReadySeconds", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Tolerations = append(ds.Spec.Template.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
			ds.Spec.MinReadySeconds = 9
		}, []string{"tolerations", "minReadySeconds"}},
		{"a field not named", func(ds *appsv1.DaemonSet) { ds.Spec.RevisionHistoryLimit = new(int32) }, []string{"spec"}},
		{"another object", func(ds *appsv1.DaemonSet) {
			ds.UID = "uid-2"
			ds.Spec.MinReadySeconds = 9
		}, nil},
	})
	if got := restoredFields(nil, desired); got != nil {
		t.Errorf("restoredFields without a replaced object = %q, want nil", got)
	}
}

// changeCase is a change to a DaemonSet and the fields that comparing the
// changed DaemonSet with the original names for it.
type changeCase struct {
	name   string
	change func(*appsv1.DaemonSet)
	want   []string
}

// testChanges runs each case as a subtest: it changes a copy of base and
// checks that compare, called what in errors, names the case's fields.
func testChanges(t *testing.T, base *appsv1.DaemonSet, what string, compare func(t *testing.T, changed, base *appsv1.DaemonSet) []string, cases []changeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			changed := base.DeepCopy()
			tc.change(changed)
			if got := compare(t, changed, base); !slices.Equal(got, tc.want) {
				t.Errorf("%s = %q, want %q", what, got, tc.want)
			}
		})
	}
}

// withTLSArgs returns ds with kube-rbac-proxy's TLS arguments replaced by args.
func withTLSArgs(ds *appsv1.DaemonSet, args ...string) *appsv1.DaemonSet {
	ds = ds.DeepCopy()
	c := findContainer(&ds.Spec.Template.Spec, ContainerKubeRBACProxy)
	c.Args = slices.DeleteFunc(c.Args, func(a string) bool {
		return strings.HasPrefix(a, flagTLSMinVersion+"=") || strings.HasPrefix(a, flagTLSCipherSuites+"=")
	})
	c.Args = append(c.Args, args...)
	return ds
}

func TestTLSMoveNamesTheProfile(t *testing.T) {
	intermediate := defaultDesired()
	modern := defaultDesired()
	modern.TLSProfile = &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}
	kept := defaultDesired()
	kept.KubeRBACProxyTLSArgs = []string{"--tls-min-version=VersionTLS13"}
	ds, err := DesiredDaemonSet(intermediate)
	if err != nil {
		t.Fatal(err)
	}
	args := intermediate.TLSArgs()
	reversed := slices.Clone(args)
	slices.Reverse(reversed)

	for _, tc := range []struct {
		name string
		ds   *appsv1.DaemonSet
		d    Desired
		want string
	}{
		{"no object", nil, modern, ""},
		{"same arguments", ds, intermediate, ""},
		{"same arguments in another order", withTLSArgs(ds, reversed...), intermediate, ""},
		{"to Modern", ds, modern, "Modern, --tls-min-version=VersionTLS13"},
		{"back to unset", withTLSArgs(ds, "--tls-min-version=VersionTLS13"), intermediate, "unset (Intermediate), --tls-min-version=VersionTLS12"},
		{"kept while unknown", ds, kept, "kept while unknown, --tls-min-version=VersionTLS13"},
		{"unreadable arguments", withTLSArgs(ds, "--tls-min-version=VersionTLS99"), intermediate, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tlsMove(tc.ds, &tc.d); got != tc.want {
				t.Errorf("tlsMove = %q, want %q", got, tc.want)
			}
		})
	}
}

// Result.Restored and Result.TLSMoved describe an update of an existing
// object, and nothing else.
func TestResultNamesWhatTheApplyReplaced(t *testing.T) {
	fc, m := newManagedCluster(t)
	res := apply(t, m, defaultDesired())
	if !res.Created || res.Restored != nil || res.TLSMoved != "" {
		t.Errorf("create: created %v, restored %q, TLS moved %q; want a create that replaced nothing", res.Created, res.Restored, res.TLSMoved)
	}
	fc.sync()

	fc.edit(func(ds *appsv1.DaemonSet) {
		findContainer(&ds.Spec.Template.Spec, ContainerExtractor).Image = "quay.io/evil/extractor:latest"
	})
	res = apply(t, m, defaultDesired())
	if want := []string{"container extractor image"}; !res.Changed || !slices.Equal(res.Restored, want) || res.TLSMoved != "" {
		t.Errorf("repair: result %s, restored %q, TLS moved %q; want %q restored, TLS unmoved", summary(res), res.Restored, res.TLSMoved, want)
	}
	fc.sync()

	modern := defaultDesired()
	modern.TLSProfile = &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}
	res = apply(t, m, modern)
	if want := "Modern, --tls-min-version=VersionTLS13"; !res.Changed || res.TLSMoved != want {
		t.Errorf("profile change: result %s, TLS moved %q, want %q", summary(res), res.TLSMoved, want)
	}
	if want := []string{"container kube-rbac-proxy args"}; !slices.Equal(res.Restored, want) {
		t.Errorf("profile change: restored %q, want %q", res.Restored, want)
	}
	fc.sync()

	res = apply(t, m, modern)
	if res.Changed || res.Restored != nil || res.TLSMoved != "" {
		t.Errorf("no-op: result %s, restored %q, TLS moved %q; want nothing", summary(res), res.Restored, res.TLSMoved)
	}
}

// A lost race to another writer's change (issue 46, escape 5): the winner
// changed the image after the caller's read. The retry reads it, and does
// not write over it: that write would undo the winner's change, a repair
// the caller's repair gate must decide on once the change reaches it as
// drift. The one write is the first attempt's, which lost.
func TestLostRaceToAnotherWriterIsLeftToTheGate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cacheSees bool // the informer delivers the winning write; else a live read
	}{
		{"from the cache", true},
		{"from the server", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc, m := driftedWithOneConflict(t, func(fc *fakeCluster) {
				ds := fc.stored().DeepCopy()
				findContainer(&ds.Spec.Template.Spec, ContainerExtractor).Image = "quay.io/evil/extractor:latest"
				if _, err := fc.srv.Update(ds); err != nil {
					t.Errorf("winning write: %v", err)
				}
				if tc.cacheSees {
					fc.sync()
				}
			})
			// The wait for a cache that never moves costs no time on a
			// fake clock.
			m.clock = clocktesting.NewFakeClock(time.Now())
			fc.client.ClearActions()

			_, err := m.Apply(context.Background(), defaultDesired())
			if !errors.Is(err, ErrLostToAnotherWriter) {
				t.Fatalf("Apply error = %v, want ErrLostToAnotherWriter", err)
			}
			if got := image(fc.stored(), ContainerExtractor); got != "quay.io/evil/extractor:latest" {
				t.Errorf("extractor image %q: the apply wrote over the winner", got)
			}
			if got := fc.requests(); got.Writes != 1 {
				t.Errorf("%d writes (%v), want only the attempt that lost", got.Writes, got.Verbs)
			}
		})
	}
}

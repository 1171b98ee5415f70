// Another writer's part in an apply: a lost race, an object replaced for its selector, what a write put back.

package resources

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/insights-runtime-extractor/controller/pkg/tlsprofile"
)

// ErrLostToAnotherWriter: an apply lost a race to another writer's change, which is for the repair gate to undo.
var ErrLostToAnotherWriter = errors.New("lost a race to another writer's change, left to the repair gate")

// lostToAnotherWriter reports whether now (read after a lost race) shows a change since before not this manager's.
func (m *Manager) lostToAnotherWriter(before, now *appsv1.DaemonSet) bool {
	switch {
	case before == nil || now != nil && now.DeletionTimestamp != nil:
		return false
	case now == nil || now.UID != before.UID, now.Generation != before.Generation && !m.IsOwnWrite(now.UID, now.Generation):
		return true
	}
	meta := OwnedMetadata(now)
	return !maps.Equal(OwnedMetadata(before), meta) && !m.IsOwnMetadata(now.UID, now.ResourceVersion, meta)
}

// cacheCatchUp bounds the wait (polled every catchUpPoll) for the cache to show what a lost race ran into.
const cacheCatchUp, catchUpPoll, applyAttempts = time.Second, 5 * time.Millisecond, 5

// retryLostRaces runs attempt until it does not lose a race, at most applyAttempts times; no jitter: the model replays.
func (m *Manager) retryLostRaces(ctx context.Context, attempt func() error) error {
	b := wait.Backoff{Steps: applyAttempts, Duration: 10 * time.Millisecond, Factor: 2}
	for {
		err := attempt()
		lostRace := apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) // a fresh read fixes
		if !lostRace || b.Steps <= 1 || ctx.Err() != nil {
			return err
		}
		m.clock.Sleep(b.Step())
	}
}

// readAttempt reads the DaemonSet (nil: none) after lost lost races: the cache's, or an own write it lacks; after one,
// once it shows other than tried; the server's after two (status writes keep it behind) or if behind an own write.
func (m *Manager) readAttempt(ctx context.Context, lost int, tried *appsv1.DaemonSet) (*appsv1.DaemonSet, error) {
poll:
	for waited := time.Duration(0); lost < 2; waited += catchUpPoll {
		cached, err := m.lister.DaemonSets(Namespace).Get(DaemonSetName)
		if lost == 0 {
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("read cache: %w", err)
			}
			if exp := m.expectation(cached); exp != nil || cached == nil {
				return exp, nil
			}
		}
		switch {
		case apierrors.IsNotFound(err) && tried != nil:
			return nil, nil // gone (an update lost to a delete)
		case err != nil:
		case tried == nil || cached.UID != tried.UID || cached.ResourceVersion != tried.ResourceVersion:
			if generation, adopting := m.expectedGeneration(cached); adopting || cached.Generation >= generation {
				return cached.DeepCopy(), nil
			}
			break poll // the cache is behind an own write
		}
		if ctx.Err() != nil || waited >= cacheCatchUp {
			break
		}
		m.clock.Sleep(catchUpPoll)
	}
	ds, err := m.client.AppsV1().DaemonSets(Namespace).Get(ctx, DaemonSetName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	return ds, nil
}

// isImmutableSelector reports whether err is a 422 Invalid for spec.selector alone, which a replace cures.
func isImmutableSelector(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	causes := status.Status().Details.Causes
	return len(causes) > 0 && !slices.ContainsFunc(causes, func(c metav1.StatusCause) bool { return c.Field != "spec.selector" })
}

// restoredFields names what a write put back, from before to after: the fields people change, else "spec".
func restoredFields(before, after *appsv1.DaemonSet) []string {
	if before == nil || after == nil || before.UID != after.UID {
		return nil
	}
	var out []string
	differs := func(name string, a, b any) {
		if !apiequality.Semantic.DeepEqual(a, b) {
			out = append(out, name)
		}
	}
	bp, ap := &before.Spec.Template.Spec, &after.Spec.Template.Spec
	for _, ac := range ap.Containers {
		bc := findContainer(bp, ac.Name)
		if bc == nil {
			out = append(out, "container "+ac.Name)
			continue
		}
		differs("container "+ac.Name+" image", bc.Image, ac.Image)
		differs("container "+ac.Name+" command", bc.Command, ac.Command)
		differs("container "+ac.Name+" args", bc.Args, ac.Args)
		differs("container "+ac.Name+" env", bc.Env, ac.Env)
		differs("container "+ac.Name+" resources", bc.Resources, ac.Resources)
		differs("container "+ac.Name+" securityContext", bc.SecurityContext, ac.SecurityContext)
		differs("container "+ac.Name+" volumeMounts", bc.VolumeMounts, ac.VolumeMounts)
	}
	for _, bc := range bp.Containers {
		if findContainer(ap, bc.Name) == nil {
			out = append(out, "removed container "+PrintableName(bc.Name)) // someone else's name, printed in Events
		}
	}
	differs("initContainers", bp.InitContainers, ap.InitContainers)
	differs("volumes", bp.Volumes, ap.Volumes)
	differs("tolerations", bp.Tolerations, ap.Tolerations)
	differs("nodeSelector", bp.NodeSelector, ap.NodeSelector)
	differs("affinity", bp.Affinity, ap.Affinity)
	differs("priorityClassName", bp.PriorityClassName, ap.PriorityClassName)
	differs("serviceAccountName", bp.ServiceAccountName, ap.ServiceAccountName)
	differs("pod securityContext", bp.SecurityContext, ap.SecurityContext)
	differs("template labels", before.Spec.Template.Labels, after.Spec.Template.Labels)
	differs("template annotations", before.Spec.Template.Annotations, after.Spec.Template.Annotations)
	differs("updateStrategy", before.Spec.UpdateStrategy, after.Spec.UpdateStrategy)
	differs("minReadySeconds", before.Spec.MinReadySeconds, after.Spec.MinReadySeconds)
	if len(out) == 0 && !apiequality.Semantic.DeepEqual(before.Spec, after.Spec) {
		out = append(out, "spec")
	}
	return out
}

// MaxNameBytes bounds a foreign name in messages.
const MaxNameBytes = 64

// PrintableName makes a name someone else chose safe to print: non-printable runes (bidi overrides too) become '?'.
func PrintableName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if !unicode.IsPrint(r) || r == unicode.ReplacementChar {
			r = '?'
		}
		if b.Len()+len(string(r)) > MaxNameBytes {
			break
		}
		b.WriteRune(r)
	}
	return cmp.Or(b.String(), "?")
}

// tlsMove names the TLS profile (and minimum version) d moves ds's kube-rbac-proxy to; "" if the arguments stay.
func tlsMove(ds *appsv1.DaemonSet, d *Desired) string {
	have, ok := KubeRBACProxyTLSArgsOf(ds)
	want := d.TLSArgs()
	if !ok || slices.Equal(slices.Sorted(slices.Values(have)), slices.Sorted(slices.Values(want))) {
		return ""
	}
	name := tlsprofile.Describe(d.TLSProfile)
	if d.KubeRBACProxyTLSArgs != nil {
		name = "kept while unknown" // the caller pinned the arguments, not a profile
	}
	if i := slices.IndexFunc(want, func(arg string) bool { return strings.HasPrefix(arg, flagTLSMinVersion+"=") }); i >= 0 {
		return name + ", " + want[i]
	}
	return name
}

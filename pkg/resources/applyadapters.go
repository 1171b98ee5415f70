package resources

import (
	"context"

	"github.com/openshift/library-go/pkg/operator/events"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsclientv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
)

// prefetchedDaemonSets hands ApplyDaemonSet the DaemonSet already read (from the cache, usually)
// and stamps FieldManager on its writes; as a DaemonSetsGetter it returns itself, scoped.
type prefetchedDaemonSets struct {
	appsclientv1.DaemonSetInterface // of namespace, once scoped
	m                               *Manager
	namespace                       string
	existing                        *appsv1.DaemonSet // nil: known not to exist
	sent                            *bool             // set by each write
}

func (p prefetchedDaemonSets) DaemonSets(namespace string) appsclientv1.DaemonSetInterface {
	p.DaemonSetInterface, p.namespace = p.m.client.AppsV1().DaemonSets(namespace), namespace
	return p
}

func (p prefetchedDaemonSets) Get(ctx context.Context, name string, opts metav1.GetOptions) (*appsv1.DaemonSet, error) {
	if p.namespace != Namespace || name != DaemonSetName {
		return p.DaemonSetInterface.Get(ctx, name, opts)
	}
	if p.existing == nil {
		return nil, apierrors.NewNotFound(appsv1.Resource("daemonsets"), name)
	}
	return p.existing.DeepCopy(), nil
}

func (p prefetchedDaemonSets) Create(ctx context.Context, ds *appsv1.DaemonSet, opts metav1.CreateOptions) (*appsv1.DaemonSet, error) {
	opts.FieldManager = FieldManager
	*p.sent = true
	p.m.sending()
	return p.DaemonSetInterface.Create(ctx, ds, opts)
}

func (p prefetchedDaemonSets) Update(ctx context.Context, ds *appsv1.DaemonSet, opts metav1.UpdateOptions) (*appsv1.DaemonSet, error) {
	opts.FieldManager = FieldManager
	*p.sent = true
	p.m.sending()
	return p.DaemonSetInterface.Update(ctx, ds, opts)
}

// writeEventsOnly drops ApplyDaemonSet's warnings for a failed write: a lost race is retried, a final failure returned.
type writeEventsOnly struct{ events.Recorder }

func (writeEventsOnly) Warning(string, string)                  {}
func (writeEventsOnly) Warningf(string, string, ...interface{}) {}

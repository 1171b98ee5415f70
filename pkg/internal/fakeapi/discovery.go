package fakeapi

import (
	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// ConfigDiscovery returns a discovery client whose server serves the given
// config.openshift.io/v1 resources; with none it serves no such group, as a
// cluster that is not OpenShift.
func ConfigDiscovery(resources ...metav1.APIResource) *fakediscovery.FakeDiscovery {
	d := kubefake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	if len(resources) > 0 {
		d.Resources = []*metav1.APIResourceList{{
			GroupVersion: configv1.GroupVersion.String(),
			APIResources: resources,
		}}
	}
	return d
}

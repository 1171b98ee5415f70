// Package configapi tells whether the cluster serves a resource of
// OpenShift's config.openshift.io/v1 API (absent on vanilla Kubernetes).
package configapi

import (
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
)

// Serves reports whether config.openshift.io/v1 has resource (a plural
// name, e.g. "clusterversions"); a group the server does not know is false,
// not an error.
func Serves(disco discovery.DiscoveryInterface, resource string) (bool, error) {
	list, err := disco.ServerResourcesForGroupVersion(configv1.GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", configv1.GroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == resource {
			return true, nil
		}
	}
	return false, nil
}

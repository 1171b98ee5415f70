package testcluster

import (
	"context"
	"fmt"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	configv1client "github.com/openshift/client-go/config/clientset/versioned/typed/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// createOpenShiftConfig creates the singletons an OpenShift cluster has: the
// ClusterVersion "version" (with the desired release in its status), the
// APIServer and Infrastructure "cluster", and the insights ClusterOperator. They
// are created concurrently: the first request for each CRD makes the API server
// build its handler and compile its validation rules, which takes a while.
func (c *Cluster) createOpenShiftConfig(ctx context.Context) error {
	// The typed objects carry fields of other feature sets (spec.signatureStores),
	// which the Default CRDs prune with a warning each time: expected, not news.
	quiet := rest.CopyConfig(c.RESTConfig)
	quiet.WarningHandler = rest.NoWarnings{}
	client, err := configclient.NewForConfig(quiet)
	if err != nil {
		return fmt.Errorf("create config client: %w", err)
	}
	cfg := client.ConfigV1()
	return parallel(
		func() error { return c.createClusterVersion(ctx, cfg) },
		func() error {
			api := &configv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: clusterConfigName}}
			return createIfMissing(ctx, cfg.APIServers().Create, "apiserver", clusterConfigName, api)
		},
		func() error { return c.createInfrastructure(ctx, cfg) },
		func() error {
			co := &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: InsightsOperator}}
			return createIfMissing(ctx, cfg.ClusterOperators().Create, "clusteroperator", InsightsOperator, co)
		},
	)
}

// createIfMissing creates obj, the kind named objName; one that a reused Dir
// already has is kept as it is.
func createIfMissing[T any](ctx context.Context, create func(context.Context, *T, metav1.CreateOptions) (*T, error), kind, objName string, obj *T) error {
	if _, err := create(ctx, obj, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("create %s %s: %w", kind, objName, err)
	}
	return nil
}

// createClusterVersion creates "version" and, through the status subresource as
// the cluster-version operator would, records the desired release.
func (c *Cluster) createClusterVersion(ctx context.Context, cfg configv1client.ConfigV1Interface) error {
	cv := &configv1.ClusterVersion{
		ObjectMeta: metav1.ObjectMeta{Name: clusterVersionName},
		Spec: configv1.ClusterVersionSpec{
			ClusterID: configv1.ClusterID("00000000-0000-4000-8000-000000000001"),
			Channel:   "stable-" + minorOf(c.opts.Version),
		},
	}
	return createWithStatus(ctx, cfg.ClusterVersions(), "clusterversion", clusterVersionName, cv, func(created *configv1.ClusterVersion) bool {
		if created.Status.Desired.Version != "" {
			return false // a reused Dir: keep whatever version was set
		}
		release := configv1.Release{
			Version: c.opts.Version,
			Image:   "quay.io/openshift-release-dev/ocp-release:" + c.opts.Version + "-x86_64",
		}
		now := metav1.Now()
		created.Status = configv1.ClusterVersionStatus{
			Desired:            release,
			ObservedGeneration: created.Generation,
			VersionHash:        "testcluster",
			AvailableUpdates:   nil,
			History: []configv1.UpdateHistory{{
				State: configv1.CompletedUpdate, StartedTime: now, CompletionTime: &now,
				Version: release.Version, Image: release.Image,
			}},
		}
		return true
	})
}

// createInfrastructure creates "cluster" with a highly available topology, which
// library-go's controllercmd reads to pick its leader-election defaults.
func (c *Cluster) createInfrastructure(ctx context.Context, cfg configv1client.ConfigV1Interface) error {
	infra := &configv1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Name: clusterConfigName},
		Spec: configv1.InfrastructureSpec{
			PlatformSpec: configv1.PlatformSpec{Type: configv1.NonePlatformType},
		},
	}
	return createWithStatus(ctx, cfg.Infrastructures(), "infrastructure", clusterConfigName, infra, func(created *configv1.Infrastructure) bool {
		created.Status = configv1.InfrastructureStatus{
			InfrastructureName:     "testcluster",
			PlatformStatus:         &configv1.PlatformStatus{Type: configv1.NonePlatformType},
			APIServerURL:           c.RESTConfig.Host,
			APIServerInternalURL:   c.RESTConfig.Host,
			ControlPlaneTopology:   configv1.HighlyAvailableTopologyMode,
			InfrastructureTopology: configv1.HighlyAvailableTopologyMode,
			CPUPartitioning:        configv1.CPUPartitioningNone,
		}
		return true
	})
}

// statusClient is the typed client of a resource with a status subresource.
type statusClient[T any] interface {
	Create(context.Context, *T, metav1.CreateOptions) (*T, error)
	Get(context.Context, string, metav1.GetOptions) (*T, error)
	UpdateStatus(context.Context, *T, metav1.UpdateOptions) (*T, error)
}

// createWithStatus creates obj, the kind named objName, or reads the one a
// reused Dir already has. setStatus then sets its status on what the server
// returned, which is written through the status subresource (as the
// resource's operator would), unless setStatus returns false to keep it.
func createWithStatus[T any](ctx context.Context, client statusClient[T], kind, objName string, obj *T, setStatus func(*T) bool) error {
	created, err := client.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = client.Get(ctx, objName, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("create %s %s: %w", kind, objName, err)
	}
	if !setStatus(created) {
		return nil
	}
	if _, err := client.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set %s %s status: %w", kind, objName, err)
	}
	return nil
}

// minorOf turns "4.22.0" into "4.22".
func minorOf(version string) string {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return version
	}
	return parts[0] + "." + parts[1]
}

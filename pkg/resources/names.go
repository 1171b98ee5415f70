// Package resources owns the runtime extractor's DaemonSet: its desired state
// (DesiredDaemonSet) and the writes that get it there (Manager).
package resources

import "github.com/insights-runtime-extractor/controller/pkg/config"

// Names shared by the whole controller: its contract with the platform and the insights operator.
const (
	Namespace     = config.Namespace // defined with the config, which this package imports
	DaemonSetName = "insights-runtime-extractor"
	ConfigMapName = config.ConfigMapName // the insights operator's configuration
	ConfigMapKey  = config.ConfigKey     // holds config.yaml

	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "insights-operator"
	LabelName      = "app.kubernetes.io/name" // also the DaemonSet's (immutable) pod selector
	NameValue      = "insights-runtime-extractor"

	// VersionAnnotation is on the DaemonSet's metadata, not its pod template: an upgrade shows without rolling the pods.
	VersionAnnotation = "insights.openshift.io/runtime-extractor-version"

	ServiceAccountName         = "insights-runtime-extractor-sa"  // provided by the platform
	PriorityClassName          = "openshift-user-critical"        // the default; provided by the platform
	KubeRBACProxyConfigMapName = "kube-rbac-proxy"                // kube-rbac-proxy's authorization config
	TLSSecretName              = "insights-runtime-extractor-tls" // kube-rbac-proxy's serving certificate
	FieldManager               = "runtime-extractor-controller"   // of every write this controller makes

	ContainerExtractor     = "extractor"       // privileged: inspects the node's containers through the CRI-O socket
	ContainerExporter      = "exporter"        // serves the extracted data over HTTP on localhost
	ContainerKubeRBACProxy = "kube-rbac-proxy" // authenticates and authorizes access to the exporter

	// OSNodeSelectorKey=OSNodeSelectorValue keeps the pods on Linux, the only OS the extractor supports.
	OSNodeSelectorKey   = "kubernetes.io/os"
	OSNodeSelectorValue = "linux"
)

// Event reasons of the manager, restated from library-go's resourceapply so callers do not depend on its format.
const (
	EventReasonCreated = "DaemonSetCreated"
	EventReasonUpdated = "DaemonSetUpdated"
	EventReasonDeleted = "DaemonSetDeleted"
)

// OwnedLabels returns the labels that mark the runtime extractor's objects.
func OwnedLabels() map[string]string {
	return map[string]string{LabelManagedBy: ManagedByValue, LabelName: NameValue}
}

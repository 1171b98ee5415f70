package resources

import "github.com/insights-runtime-extractor/controller/pkg/config"

// Names shared by the whole controller. They are the contract with the
// platform (the namespace, the objects the platform provides) and with the
// insights operator (labels, annotations), so they live in one place.
const (
	// Namespace is where the runtime extractor runs (defined with the config,
	// which this package imports and so cannot be imported by).
	Namespace = config.Namespace
	// DaemonSetName is the name of the managed DaemonSet.
	DaemonSetName = "insights-runtime-extractor"

	// ConfigMapName is the insights operator's configuration ConfigMap.
	ConfigMapName = config.ConfigMapName
	// ConfigMapKey is the key of ConfigMapName that holds config.yaml.
	ConfigMapKey = config.ConfigKey

	// LabelManagedBy marks the DaemonSet as owned by the insights operator.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "insights-operator"
	// LabelName identifies the runtime extractor's objects and pods; it is
	// also the DaemonSet's (immutable) pod selector.
	LabelName = "app.kubernetes.io/name"
	// NameValue is the value of LabelName.
	NameValue = "insights-runtime-extractor"

	// VersionAnnotation records the target release version on the DaemonSet's
	// metadata only (not its pod template), so an upgrade is visible without
	// rolling the pods for a version number.
	VersionAnnotation = "insights.openshift.io/runtime-extractor-version"

	// ServiceAccountName is the pods' service account (provided by the platform).
	ServiceAccountName = "insights-runtime-extractor-sa"
	// PriorityClassName is the default priority class (provided by the platform).
	PriorityClassName = "openshift-user-critical"
	// KubeRBACProxyConfigMapName holds kube-rbac-proxy's authorization config.
	KubeRBACProxyConfigMapName = "kube-rbac-proxy"
	// TLSSecretName holds the serving certificate of kube-rbac-proxy.
	TLSSecretName = "insights-runtime-extractor-tls"

	// FieldManager is the field manager of every write this controller makes.
	FieldManager = "runtime-extractor-controller"

	// ContainerExtractor is the privileged container that inspects the
	// node's containers through the CRI-O socket.
	ContainerExtractor = "extractor"
	// ContainerExporter serves the extracted data over HTTP on localhost.
	ContainerExporter = "exporter"
	// ContainerKubeRBACProxy authenticates and authorizes access to the exporter.
	ContainerKubeRBACProxy = "kube-rbac-proxy"

	// OSNodeSelectorKey restricts the pods to Linux nodes; it cannot be
	// overridden by configuration.
	OSNodeSelectorKey = "kubernetes.io/os"
	// OSNodeSelectorValue is the only operating system the extractor supports.
	OSNodeSelectorValue = "linux"
)

// Event reasons the manager emits through library-go's events.Recorder.
// library-go's resourceapply names them after the kind; they are restated
// here so that callers and tests do not depend on a format string.
const (
	// EventReasonCreated: the DaemonSet was missing and has been created.
	EventReasonCreated = "DaemonSetCreated"
	// EventReasonUpdated: the DaemonSet differed from the desired state and
	// has been updated.
	EventReasonUpdated = "DaemonSetUpdated"
	// EventReasonDeleted: the DaemonSet existed and has been deleted.
	EventReasonDeleted = "DaemonSetDeleted"
)

// OwnedLabels returns the labels that mark the runtime extractor's objects.
func OwnedLabels() map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedByValue,
		LabelName:      NameValue,
	}
}

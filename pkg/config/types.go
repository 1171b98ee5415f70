// Package config parses, validates and watches config.yaml of insights-config: the extractor's switch and scheduling.
package config

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// InsightsConfiguration is the part of config.yaml this controller reads; other sections are ignored.
type InsightsConfiguration struct {
	DataReporting DataReporting `json:"dataReporting"`
}

// DataReporting is the dataReporting section of config.yaml.
type DataReporting struct {
	DisableRuntimeExtractor bool             `json:"disableRuntimeExtractor"`
	RuntimeExtractor        RuntimeExtractor `json:"runtimeExtractor,omitempty"`
}

// RuntimeExtractor holds the DaemonSet's scheduling settings; zero values keep the defaults.
type RuntimeExtractor struct {
	Tolerations       []corev1.Toleration `json:"tolerations,omitempty"`       // added to the pod template's
	NodeSelector      map[string]string   `json:"nodeSelector,omitempty"`      // merged into the pod template's; kubernetes.io/os must stay linux
	PriorityClassName string              `json:"priorityClassName,omitempty"` // replaces the default when set
	Resources         ContainerResources  `json:"resources,omitempty"`
}

// ContainerResources overrides the DaemonSet containers' resource requirements; nil keeps a container's defaults.
type ContainerResources struct {
	Extractor     *corev1.ResourceRequirements `json:"extractor,omitempty"`
	Exporter      *corev1.ResourceRequirements `json:"exporter,omitempty"`
	KubeRBACProxy *corev1.ResourceRequirements `json:"kube-rbac-proxy,omitempty"`
}

// Default is the configuration without the ConfigMap, config.yaml or dataReporting: enabled, default scheduling.
func Default() *InsightsConfiguration { return &InsightsConfiguration{} }

// DeepCopy returns an independent copy of c.
func (c *InsightsConfiguration) DeepCopy() *InsightsConfiguration {
	if c == nil {
		return nil
	}
	out := *c
	c.DataReporting.RuntimeExtractor.DeepCopyInto(&out.DataReporting.RuntimeExtractor)
	return &out
}

// DeepCopyInto copies r into out, sharing no memory with r.
func (r *RuntimeExtractor) DeepCopyInto(out *RuntimeExtractor) {
	*out = *r
	out.Tolerations = slices.Clone(r.Tolerations)
	for i := range r.Tolerations {
		r.Tolerations[i].DeepCopyInto(&out.Tolerations[i])
	}
	out.NodeSelector = maps.Clone(r.NodeSelector)
	out.Resources.Extractor = r.Resources.Extractor.DeepCopy()
	out.Resources.Exporter = r.Resources.Exporter.DeepCopy()
	out.Resources.KubeRBACProxy = r.Resources.KubeRBACProxy.DeepCopy()
}

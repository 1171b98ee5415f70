// Package config reads the insights operator's config.yaml (the `config.yaml`
// key of the openshift-insights/insights-config ConfigMap): the switch that
// turns the runtime extractor off and the scheduling settings of its
// DaemonSet. It parses, validates and watches that ConfigMap.
package config

import (
	corev1 "k8s.io/api/core/v1"
)

// InsightsConfiguration is the part of config.yaml this controller reads.
// Every other section of the insights operator's config is ignored.
type InsightsConfiguration struct {
	DataReporting DataReporting `json:"dataReporting"`
}

// DataReporting is the dataReporting section of config.yaml.
type DataReporting struct {
	// DisableRuntimeExtractor turns the runtime extractor off. In YAML it is
	// a bool, or the string "true"/"false" in any case (as the insights
	// operator accepts).
	DisableRuntimeExtractor bool `json:"disableRuntimeExtractor"`
	// RuntimeExtractor holds the optional scheduling settings of the DaemonSet.
	RuntimeExtractor RuntimeExtractor `json:"runtimeExtractor,omitempty"`
}

// RuntimeExtractor holds the scheduling settings of the runtime extractor
// DaemonSet. Every field is optional; the zero value keeps the defaults.
type RuntimeExtractor struct {
	// Tolerations are added to the pod template.
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// NodeSelector is merged into the pod template's node selector. It may
	// not move kubernetes.io/os away from linux.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// PriorityClassName replaces the default priority class when set.
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// Resources overrides the resource requirements per container.
	Resources ContainerResources `json:"resources,omitempty"`
}

// ContainerResources overrides the resource requirements of each container of
// the DaemonSet. A nil entry keeps that container's defaults.
type ContainerResources struct {
	// Extractor is the extractor container's requirements.
	Extractor *corev1.ResourceRequirements `json:"extractor,omitempty"`
	// Exporter is the exporter container's requirements.
	Exporter *corev1.ResourceRequirements `json:"exporter,omitempty"`
	// KubeRBACProxy is the kube-rbac-proxy container's requirements.
	KubeRBACProxy *corev1.ResourceRequirements `json:"kube-rbac-proxy,omitempty"`
}

// containerRequirements is one container's entry of ContainerResources.
type containerRequirements struct {
	// field is the entry's key in config.yaml.
	field string
	// requirements points into the ContainerResources.
	requirements **corev1.ResourceRequirements
}

// containers lists the entries of c in the order they are decoded and
// validated, so each container is handled by one loop instead of once per field.
func (c *ContainerResources) containers() []containerRequirements {
	return []containerRequirements{
		{field: fieldExtractor, requirements: &c.Extractor},
		{field: fieldExporter, requirements: &c.Exporter},
		{field: fieldKubeRBACProxy, requirements: &c.KubeRBACProxy},
	}
}

// Default returns the configuration used when the ConfigMap, its config.yaml
// key or its dataReporting section is missing: the extractor is enabled with
// default scheduling.
func Default() *InsightsConfiguration {
	return &InsightsConfiguration{}
}

// DeepCopy returns an independent copy of c.
func (c *InsightsConfiguration) DeepCopy() *InsightsConfiguration {
	if c == nil {
		return nil
	}
	out := &InsightsConfiguration{}
	out.DataReporting.DisableRuntimeExtractor = c.DataReporting.DisableRuntimeExtractor
	c.DataReporting.RuntimeExtractor.DeepCopyInto(&out.DataReporting.RuntimeExtractor)
	return out
}

// DeepCopyInto copies r into out, sharing no memory with r.
func (r *RuntimeExtractor) DeepCopyInto(out *RuntimeExtractor) {
	*out = RuntimeExtractor{PriorityClassName: r.PriorityClassName}
	if r.Tolerations != nil {
		out.Tolerations = make([]corev1.Toleration, len(r.Tolerations))
		for i := range r.Tolerations {
			r.Tolerations[i].DeepCopyInto(&out.Tolerations[i])
		}
	}
	if r.NodeSelector != nil {
		out.NodeSelector = make(map[string]string, len(r.NodeSelector))
		for k, v := range r.NodeSelector {
			out.NodeSelector[k] = v
		}
	}
	out.Resources = r.Resources
	for _, c := range out.Resources.containers() {
		*c.requirements = (*c.requirements).DeepCopy()
	}
}

// DeepCopy returns an independent copy of r.
func (r *RuntimeExtractor) DeepCopy() *RuntimeExtractor {
	if r == nil {
		return nil
	}
	out := &RuntimeExtractor{}
	r.DeepCopyInto(out)
	return out
}

package config

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	supportedOperators = []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}
	supportedEffects   = []corev1.TaintEffect{corev1.TaintEffectNoExecute, corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule}
	// Extended resources (GPUs and the like) have no use here; rejecting them catches typos such as "memroy".
	supportedResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceEphemeralStorage, corev1.ResourceMemory}
)

// Validate applies the API server's pod-spec rules, so a bad setting is refused here, not by the DaemonSet update.
func (r *RuntimeExtractor) Validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range r.Tolerations {
		errs = append(errs, validateToleration(&r.Tolerations[i], p.Child("tolerations").Index(i))...)
	}
	for _, k := range slices.Sorted(maps.Keys(r.NodeSelector)) { // in key order, for a stable message
		v, kp := r.NodeSelector[k], p.Child("nodeSelector").Key(k)
		errs = append(errs, metav1validation.ValidateLabelName(k, kp)...)
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(kp, v, msg))
		}
		if k == corev1.LabelOSStable && v != "linux" {
			errs = append(errs, field.Invalid(kp, v, `must be "linux": the runtime extractor runs only on Linux nodes`))
		}
	}
	if r.PriorityClassName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(r.PriorityClassName) {
			errs = append(errs, field.Invalid(p.Child("priorityClassName"), r.PriorityClassName, msg))
		}
	}
	rp := p.Child("resources")
	errs = append(errs, validateRequirements(r.Resources.Extractor, rp.Child("extractor"))...)
	errs = append(errs, validateRequirements(r.Resources.Exporter, rp.Child("exporter"))...)
	return append(errs, validateRequirements(r.Resources.KubeRBACProxy, rp.Child("kube-rbac-proxy"))...)
}

func validateToleration(t *corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, p.Child("key"))...)
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "": // empty means Equal
		if t.Key == "" {
			errs = append(errs, field.Invalid(p.Child("operator"), string(t.Operator),
				`must be "Exists" when key is empty, which means "match all values and all keys"`))
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, `must be empty when operator is "Exists"`))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), string(t.Operator), supportedOperators))
	}
	if t.Effect != "" && !slices.Contains(supportedEffects, t.Effect) {
		errs = append(errs, field.NotSupported(p.Child("effect"), string(t.Effect), supportedEffects))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(p.Child("effect"), string(t.Effect), `must be "NoExecute" when tolerationSeconds is set`))
	}
	return errs
}

func validateRequirements(req *corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	if req == nil {
		return nil
	}
	errs := append(validateResourceList(req.Limits, p.Child("limits")), validateResourceList(req.Requests, p.Child("requests"))...)
	for _, name := range slices.Sorted(maps.Keys(req.Requests)) {
		limit, ok := req.Limits[name]
		request := req.Requests[name]
		// Unsupported or negative values are reported above; comparing them would repeat it.
		if ok && slices.Contains(supportedResources, name) && limit.Sign() >= 0 && request.Sign() >= 0 && request.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), request.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	if len(req.Claims) > 0 {
		errs = append(errs, field.Forbidden(p.Child("claims"), "resource claims are not supported"))
	}
	return errs
}

func validateResourceList(list corev1.ResourceList, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(list)) {
		rp := p.Key(string(name))
		if !slices.Contains(supportedResources, name) {
			errs = append(errs, field.NotSupported(rp, string(name), supportedResources))
			continue
		}
		if q := list[name]; q.Sign() < 0 {
			errs = append(errs, field.Invalid(rp, q.String(), apivalidation.IsNegativeErrorMsg))
		}
	}
	return errs
}

package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// Where config.yaml lives: the key ConfigKey of ConfigMap Namespace/ConfigMapName.
const (
	Namespace     = "openshift-insights"
	ConfigMapName = "insights-config"
	ConfigKey     = "config.yaml"
)

// FromConfigMap reads the configuration from the insights-config ConfigMap; nil or no config.yaml means defaults.
func FromConfigMap(cm *corev1.ConfigMap) (*InsightsConfiguration, error) {
	if cm == nil {
		return Default(), nil
	}
	cfg, err := Parse([]byte(cm.Data[ConfigKey])) // absent: "", which parses as Default()
	if err != nil {
		return nil, fmt.Errorf("invalid %s in ConfigMap %s/%s: %w", ConfigKey, cm.Namespace, cm.Name, err)
	}
	return cfg, nil
}

// Parse decodes and validates config.yaml: Default() without dataReporting; unknown keys are errors only under
// runtimeExtractor (the rest is the insights operator's). YAML 1.1 as it reads it: unquoted yes/no/on/off are bools.
func Parse(data []byte) (*InsightsConfiguration, error) {
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s is not valid YAML: %w", ConfigKey, err)
	}
	dec := json.NewDecoder(bytes.NewReader(jsonData))
	dec.UseNumber() // quantities and integers keep their exact text
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode %s: %w", ConfigKey, err)
	}
	d := &decoder{}
	root := d.mapping(doc, field.NewPath(ConfigKey)) // absent, null or refused: nil, whose entries are all absent
	p := field.NewPath("dataReporting")
	dr := d.mapping(root["dataReporting"], p)
	cfg := Default()
	cfg.DataReporting.DisableRuntimeExtractor = d.flag(entry(dr, p, "disableRuntimeExtractor"))
	cfg.DataReporting.RuntimeExtractor = d.runtimeExtractor(entry(dr, p, "runtimeExtractor"))
	if len(d.errs) == 0 {
		d.errs = cfg.DataReporting.RuntimeExtractor.Validate(p.Child("runtimeExtractor"))
	}
	if len(d.errs) > 0 {
		return nil, d.errs.ToAggregate()
	}
	return cfg, nil
}

// decoder collects one field error per offending value instead of stopping at the first.
type decoder struct{ errs field.ErrorList }

// flag accepts a bool or "true"/"false" in any case, as the insights operator does; null is unset.
func (d *decoder) flag(v any, p *field.Path) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case string:
		if strings.EqualFold(t, "true") || strings.EqualFold(t, "false") {
			return strings.EqualFold(t, "true")
		}
	}
	d.errs = append(d.errs, field.TypeInvalid(p, v, `must be a boolean or the string "true" or "false"`))
	return false
}

func (d *decoder) runtimeExtractor(v any, p *field.Path) RuntimeExtractor {
	m := d.section(v, p, "nodeSelector", "priorityClassName", "resources", "tolerations")
	return RuntimeExtractor{
		Tolerations:       d.tolerations(entry(m, p, "tolerations")),
		NodeSelector:      mapOf[string](d, m["nodeSelector"], p.Child("nodeSelector"), d.string),
		PriorityClassName: d.string(entry(m, p, "priorityClassName")),
		Resources:         d.resources(entry(m, p, "resources")),
	}
}

func (d *decoder) tolerations(v any, p *field.Path) []corev1.Toleration {
	var out []corev1.Toleration
	for i, item := range as[[]any](d, v, p, "a list") {
		ip := p.Index(i)
		if item == nil {
			d.errs = append(d.errs, field.Required(ip, "must be a toleration, not null"))
			continue
		}
		m := d.section(item, ip, "effect", "key", "operator", "tolerationSeconds", "value")
		out = append(out, corev1.Toleration{
			Key:               d.string(entry(m, ip, "key")),
			Operator:          corev1.TolerationOperator(d.string(entry(m, ip, "operator"))),
			Value:             d.string(entry(m, ip, "value")),
			Effect:            corev1.TaintEffect(d.string(entry(m, ip, "effect"))),
			TolerationSeconds: d.int64(entry(m, ip, "tolerationSeconds")),
		})
	}
	return out
}

func (d *decoder) resources(v any, p *field.Path) ContainerResources {
	m := d.section(v, p, "exporter", "extractor", "kube-rbac-proxy")
	return ContainerResources{
		Extractor:     d.requirements(entry(m, p, "extractor")),
		Exporter:      d.requirements(entry(m, p, "exporter")),
		KubeRBACProxy: d.requirements(entry(m, p, "kube-rbac-proxy")),
	}
}

// requirements returns nil for an absent or null entry: the container keeps its defaults.
func (d *decoder) requirements(v any, p *field.Path) *corev1.ResourceRequirements {
	m := d.section(v, p, "limits", "requests")
	if m == nil {
		return nil
	}
	return &corev1.ResourceRequirements{
		Limits:   mapOf[corev1.ResourceName](d, m["limits"], p.Child("limits"), d.quantity),
		Requests: mapOf[corev1.ResourceName](d, m["requests"], p.Child("requests"), d.quantity),
	}
}

// mapOf decodes a mapping, each value by value, in key order for stable errors; an empty mapping is nil.
func mapOf[K ~string, V any](d *decoder, v any, p *field.Path, value func(any, *field.Path) V) map[K]V {
	m := d.mapping(v, p)
	if len(m) == 0 {
		return nil
	}
	out := make(map[K]V, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out[K(k)] = value(m[k], p.Key(k))
	}
	return out
}

func (d *decoder) quantity(v any, p *field.Path) resource.Quantity {
	var text string
	switch t := v.(type) {
	case string:
		text = t
	case json.Number:
		text = t.String()
	default:
		d.errs = append(d.errs, field.TypeInvalid(p, v, `must be a quantity, e.g. "100m", "64Mi" or 2`))
		return resource.Quantity{}
	}
	if m := decimalExponent.FindStringSubmatch(text); m != nil { // checked first: ParseQuantity scales by 10^exponent exactly, minutes for 1e-99999999
		if n, err := strconv.ParseInt(m[1], 10, 32); err != nil || n < -100 || n > 100 {
			d.errs = append(d.errs, field.Invalid(p, text, "the exponent must be between -100 and 100"))
			return resource.Quantity{}
		}
	}
	q, err := resource.ParseQuantity(text)
	switch {
	case err != nil:
		d.errs = append(d.errs, field.Invalid(p, text, err.Error()))
	case q.AsApproximateFloat64() >= math.MaxInt64: // no container needs more; comparing such values exactly takes minutes
		d.errs = append(d.errs, field.Invalid(p, text, "must be less than 8Ei"))
	}
	return q
}

var decimalExponent = regexp.MustCompile(`^[+-]?[0-9.]*[eE]([+-]?[0-9]+)$`)

// section decodes a mapping whose keys must be in known (sorted): a misspelt setting must not be dropped silently.
func (d *decoder) section(v any, p *field.Path, known ...string) map[string]any {
	m := d.mapping(v, p)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(known, k) {
			d.errs = append(d.errs, field.Forbidden(p.Child(k), "unknown field, supported fields: "+strings.Join(known, ", ")))
		}
	}
	return m
}

// entry returns m[name] and its path, in the decoder methods' argument order.
func entry(m map[string]any, p *field.Path, name string) (any, *field.Path) {
	return m[name], p.Child(name)
}

// as returns v as a T, and the zero T for an absent or null value, or after recording an error for another type.
func as[T any](d *decoder, v any, p *field.Path, what string) T {
	t, ok := v.(T)
	if !ok && v != nil {
		d.errs = append(d.errs, field.TypeInvalid(p, v, "must be "+what))
	}
	return t
}

func (d *decoder) mapping(v any, p *field.Path) map[string]any {
	return as[map[string]any](d, v, p, "a mapping")
}

// string reads null as "": YAML writes `key:` for an empty label value.
func (d *decoder) string(v any, p *field.Path) string { return as[string](d, v, p, "a string") }

func (d *decoder) int64(v any, p *field.Path) *int64 {
	switch t := v.(type) {
	case nil:
		return nil
	case json.Number:
		if n, err := t.Int64(); err == nil {
			return &n
		}
	}
	d.errs = append(d.errs, field.TypeInvalid(p, v, "must be an integer"))
	return nil
}

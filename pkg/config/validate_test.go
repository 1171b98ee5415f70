package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// Validate is exported for typed values built in code, which may hold what
// config.yaml cannot express (resource claims, for one).
func TestValidateTypedValues(t *testing.T) {
	path := field.NewPath("spec")
	cases := []struct {
		name string
		in   RuntimeExtractor
		want []string
	}{
		{name: "zero value is valid", in: RuntimeExtractor{}},
		{name: "full example is valid", in: fullExample().DataReporting.RuntimeExtractor},
		{
			name: "Exists without key or effect is valid",
			in:   RuntimeExtractor{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		},
		{
			name: "explicit linux is valid",
			in:   RuntimeExtractor{NodeSelector: map[string]string{corev1.LabelOSStable: "linux"}},
		},
		{
			name: "resource claims are refused",
			in: RuntimeExtractor{Resources: ContainerResources{Exporter: &corev1.ResourceRequirements{
				Claims: []corev1.ResourceClaim{{Name: "gpu"}},
			}}},
			want: []string{"spec.resources.exporter.claims: Forbidden: resource claims are not supported"},
		},
		{
			name: "toleration seconds need NoExecute even without effect",
			in: RuntimeExtractor{Tolerations: []corev1.Toleration{
				{Key: "a", Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](1)},
			}},
			want: []string{`spec.tolerations[0].effect: Invalid value: "": must be "NoExecute" when tolerationSeconds is set`},
		},
		{
			name: "negative request is not also compared with its limit",
			in: RuntimeExtractor{Resources: ContainerResources{Extractor: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-2")},
			}}},
			want: []string{
				`spec.resources.extractor.limits[cpu]: Invalid value: "-2": must be greater than or equal to 0`,
				`spec.resources.extractor.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0`,
			},
		},
		{
			name: "errors come in a stable order",
			in:   RuntimeExtractor{NodeSelector: map[string]string{"z z": "", "a a": "", "m m": ""}},
			want: []string{
				`spec.nodeSelector[a a]: Invalid value: "a a": ` + nameMsg,
				`spec.nodeSelector[m m]: Invalid value: "m m": ` + nameMsg,
				`spec.nodeSelector[z z]: Invalid value: "z z": ` + nameMsg,
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, err := range tc.in.Validate(path) {
				got = append(got, err.Error())
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

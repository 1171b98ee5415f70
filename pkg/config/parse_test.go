package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// fullExamplePath is the documented example config at the repository root.
var fullExamplePath = filepath.Join("..", "..", "testdata", "config", "full.yaml")

func disabled(v bool) *InsightsConfiguration {
	cfg := Default()
	cfg.DataReporting.DisableRuntimeExtractor = v
	return cfg
}

func withExtractor(r RuntimeExtractor) *InsightsConfiguration {
	cfg := Default()
	cfg.DataReporting.RuntimeExtractor = r
	return cfg
}

type parseCase struct {
	name string
	yaml string
	want *InsightsConfiguration
}

var validCases = []parseCase{
	{name: "empty", yaml: "", want: Default()},
	{name: "comments only", yaml: "# nothing here\n", want: Default()},
	{name: "empty mapping", yaml: "{}", want: Default()},
	{name: "null document", yaml: "~", want: Default()},
	{name: "null dataReporting", yaml: "dataReporting:\n", want: Default()},
	{name: "empty dataReporting", yaml: "dataReporting: {}", want: Default()},
	{name: "other sections only", yaml: "sca:\n  disabled: false\nalerting:\n  disabled: true\n", want: Default()},
	{name: "bool true", yaml: "dataReporting:\n  disableRuntimeExtractor: true\n", want: disabled(true)},
	{name: "bool false", yaml: "dataReporting:\n  disableRuntimeExtractor: false\n", want: disabled(false)},
	{name: "bool True", yaml: "dataReporting:\n  disableRuntimeExtractor: True\n", want: disabled(true)},
	{name: "bool FALSE", yaml: "dataReporting:\n  disableRuntimeExtractor: FALSE\n", want: disabled(false)},
	// YAML 1.1, as read by sigs.k8s.io/yaml and the insights operator itself.
	{name: "YAML 1.1 unquoted yes", yaml: "dataReporting:\n  disableRuntimeExtractor: yes\n", want: disabled(true)},
	{name: "YAML 1.1 unquoted off", yaml: "dataReporting:\n  disableRuntimeExtractor: off\n", want: disabled(false)},
	{name: "string true", yaml: "dataReporting:\n  disableRuntimeExtractor: \"true\"\n", want: disabled(true)},
	{name: "string mixed case", yaml: "dataReporting:\n  disableRuntimeExtractor: 'tRuE'\n", want: disabled(true)},
	{name: "string FALSE", yaml: "dataReporting:\n  disableRuntimeExtractor: \"FALSE\"\n", want: disabled(false)},
	{name: "null switch", yaml: "dataReporting:\n  disableRuntimeExtractor:\n", want: disabled(false)},
	{name: "JSON document", yaml: `{"dataReporting": {"disableRuntimeExtractor": true}}`, want: disabled(true)},
	{
		name: "insights operator documented example",
		yaml: `dataReporting:
  uploadEndpoint: https://console.redhat.com/api/ingress/v1/upload
  storagePath: /var/lib/insights-operator
  downloadEndpoint: https://console.redhat.com/api/insights-results-aggregator/v2/cluster/%s/reports
  conditionalGathererEndpoint: https://console.redhat.com/api/gathering/gathering_rules
  disableRuntimeExtractor: true
  obfuscation:
    - networking
sca:
  disabled: false
  interval: 8h0m0s
proxy:
  httpProxy: http://example.com
`,
		want: disabled(true),
	},
	{name: "null runtimeExtractor", yaml: "dataReporting:\n  runtimeExtractor:\n", want: Default()},
	{name: "empty runtimeExtractor", yaml: "dataReporting:\n  runtimeExtractor: {}\n", want: Default()},
	{
		name: "toleration Exists without key tolerates everything",
		yaml: "dataReporting:\n  runtimeExtractor:\n    tolerations:\n    - operator: Exists\n",
		want: withExtractor(RuntimeExtractor{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}),
	},
	{
		name: "toleration with implicit Equal operator",
		yaml: "dataReporting:\n  runtimeExtractor:\n    tolerations:\n    - {key: dedicated, value: insights, effect: PreferNoSchedule}\n",
		want: withExtractor(RuntimeExtractor{Tolerations: []corev1.Toleration{
			{Key: "dedicated", Value: "insights", Effect: corev1.TaintEffectPreferNoSchedule},
		}}),
	},
	{
		name: "toleration seconds with NoExecute",
		yaml: "dataReporting:\n  runtimeExtractor:\n    tolerations:\n    - {key: k, operator: Exists, effect: NoExecute, tolerationSeconds: 30}\n",
		want: withExtractor(RuntimeExtractor{Tolerations: []corev1.Toleration{
			{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
		}}),
	},
	{
		name: "node selector with an empty value written as null",
		yaml: "dataReporting:\n  runtimeExtractor:\n    nodeSelector:\n      node-role.kubernetes.io/worker:\n      kubernetes.io/os: linux\n",
		want: withExtractor(RuntimeExtractor{NodeSelector: map[string]string{
			"node-role.kubernetes.io/worker": "", "kubernetes.io/os": "linux",
		}}),
	},
	{
		name: "priority class",
		yaml: "dataReporting:\n  runtimeExtractor:\n    priorityClassName: system-node-critical\n",
		want: withExtractor(RuntimeExtractor{PriorityClassName: "system-node-critical"}),
	},
	{
		name: "quantities as numbers and strings",
		yaml: "dataReporting:\n  runtimeExtractor:\n    resources:\n      exporter:\n        requests: {cpu: 0.5, memory: 1e6}\n        limits: {cpu: 1, memory: 1Mi}\n",
		want: withExtractor(RuntimeExtractor{Resources: ContainerResources{Exporter: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1M")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Mi")},
		}}}),
	},
	{
		name: "request equal to limit",
		yaml: "dataReporting:\n  runtimeExtractor:\n    resources:\n      kube-rbac-proxy:\n        requests: {cpu: 100m}\n        limits: {cpu: 0.1}\n",
		want: withExtractor(RuntimeExtractor{Resources: ContainerResources{KubeRBACProxy: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		}}}),
	},
	{
		name: "empty container entry is kept as an explicit override",
		yaml: "dataReporting:\n  runtimeExtractor:\n    resources:\n      extractor: {}\n      exporter:\n",
		want: withExtractor(RuntimeExtractor{Resources: ContainerResources{Extractor: &corev1.ResourceRequirements{}}}),
	},
}

// fullExample is what testdata/config/full.yaml must parse to.
func fullExample() *InsightsConfiguration {
	return withExtractor(RuntimeExtractor{
		Tolerations: []corev1.Toleration{
			{Key: "node-role.kubernetes.io/infra", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			{
				Key: "example.com/maintenance", Operator: corev1.TolerationOpEqual, Value: "planned",
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](3600),
			},
		},
		NodeSelector:      map[string]string{"node-role.kubernetes.io/worker": "", "kubernetes.io/os": "linux"},
		PriorityClassName: "openshift-user-critical",
		Resources: ContainerResources{
			Extractor: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			},
			Exporter: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
			},
			KubeRBACProxy: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
			},
		},
	})
}

func assertConfigEqual(t *testing.T, want, got *InsightsConfiguration) {
	t.Helper()
	if !equality.Semantic.DeepEqual(want, got) {
		wantYAML, _ := yaml.Marshal(want)
		gotYAML, _ := yaml.Marshal(got)
		t.Errorf("config mismatch\nwant:\n%s\ngot:\n%s", wantYAML, gotYAML)
	}
}

func TestParseValid(t *testing.T) {
	for _, tc := range validCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.yaml))
			require.NoError(t, err)
			assertConfigEqual(t, tc.want, got)
		})
	}
}

func TestParseFullExample(t *testing.T) {
	data, err := os.ReadFile(fullExamplePath)
	require.NoError(t, err)
	got, err := Parse(data)
	require.NoError(t, err)
	assertConfigEqual(t, fullExample(), got)

	// "Complete" means every setting appears, so the docs show them all.
	re := got.DataReporting.RuntimeExtractor
	assert.NotEmpty(t, re.Tolerations)
	assert.NotEmpty(t, re.NodeSelector)
	assert.NotEmpty(t, re.PriorityClassName)
	assert.NotNil(t, re.Resources.Extractor)
	assert.NotNil(t, re.Resources.Exporter)
	assert.NotNil(t, re.Resources.KubeRBACProxy)
	assert.Contains(t, string(data), "disableRuntimeExtractor:")
}

type invalidCase struct {
	name    string
	yaml    string
	wantErr string
}

const (
	re       = "dataReporting:\n  runtimeExtractor:\n"
	boolMsg  = `must be a boolean or the string "true" or "false"`
	labelMsg = `a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`
	nameMsg  = `name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`
)

var invalidCases = []invalidCase{
	{name: "malformed YAML", yaml: "dataReporting: [\n", wantErr: "config.yaml is not valid YAML: yaml: line 1: did not find expected node content"},
	{name: "tab indentation", yaml: "dataReporting:\n\tdisableRuntimeExtractor: true\n", wantErr: "config.yaml is not valid YAML: yaml: line 2: found character that cannot start any token"},
	{name: "document is a scalar", yaml: "hello", wantErr: `config.yaml: Invalid value: "hello": must be a mapping`},
	{name: "document is a list", yaml: "- dataReporting: {}", wantErr: `config.yaml: Invalid value: [{"dataReporting":{}}]: must be a mapping`},
	{name: "dataReporting is a scalar", yaml: "dataReporting: 5", wantErr: `dataReporting: Invalid value: 5: must be a mapping`},
	{name: "switch quoted yes", yaml: "dataReporting:\n  disableRuntimeExtractor: \"yes\"\n", wantErr: `dataReporting.disableRuntimeExtractor: Invalid value: "yes": ` + boolMsg},
	{name: "switch number", yaml: "dataReporting:\n  disableRuntimeExtractor: 1\n", wantErr: `dataReporting.disableRuntimeExtractor: Invalid value: 1: ` + boolMsg},
	{name: "switch list", yaml: "dataReporting:\n  disableRuntimeExtractor: [true]\n", wantErr: `dataReporting.disableRuntimeExtractor: Invalid value: [true]: ` + boolMsg},
	{name: "switch mapping", yaml: "dataReporting:\n  disableRuntimeExtractor: {enabled: true}\n", wantErr: `dataReporting.disableRuntimeExtractor: Invalid value: {"enabled":true}: ` + boolMsg},
	{name: "switch padded string", yaml: "dataReporting:\n  disableRuntimeExtractor: \" true\"\n", wantErr: `dataReporting.disableRuntimeExtractor: Invalid value: " true": ` + boolMsg},
	{name: "switch empty string", yaml: "dataReporting:\n  disableRuntimeExtractor: \"\"\n", wantErr: `dataReporting.disableRuntimeExtractor: Invalid value: "": ` + boolMsg},
	{name: "runtimeExtractor is a list", yaml: "dataReporting:\n  runtimeExtractor: []\n", wantErr: `dataReporting.runtimeExtractor: Invalid value: []: must be a mapping`},
	{
		name: "unknown runtimeExtractor field", yaml: re + "    affinity: {}\n",
		wantErr: `dataReporting.runtimeExtractor.affinity: Forbidden: unknown field, supported fields: nodeSelector, priorityClassName, resources, tolerations`,
	},
	{
		name: "field names are case-sensitive", yaml: re + "    NodeSelector: {a: b}\n",
		wantErr: `dataReporting.runtimeExtractor.NodeSelector: Forbidden: unknown field, supported fields: nodeSelector, priorityClassName, resources, tolerations`,
	},
	{name: "tolerations not a list", yaml: re + "    tolerations: all\n", wantErr: `dataReporting.runtimeExtractor.tolerations: Invalid value: "all": must be a list`},
	{name: "null toleration", yaml: re + "    tolerations: [~]\n", wantErr: `dataReporting.runtimeExtractor.tolerations[0]: Required value: must be a toleration, not null`},
	{name: "scalar toleration", yaml: re + "    tolerations: [x]\n", wantErr: `dataReporting.runtimeExtractor.tolerations[0]: Invalid value: "x": must be a mapping`},
	{
		name: "unknown toleration field", yaml: re + "    tolerations: [{operator: Exists, effects: NoSchedule}]\n",
		wantErr: `dataReporting.runtimeExtractor.tolerations[0].effects: Forbidden: unknown field, supported fields: effect, key, operator, tolerationSeconds, value`,
	},
	{name: "toleration key number", yaml: re + "    tolerations: [{key: 5, operator: Exists}]\n", wantErr: `dataReporting.runtimeExtractor.tolerations[0].key: Invalid value: 5: must be a string`},
	{
		name: "toleration seconds fraction", yaml: re + "    tolerations: [{operator: Exists, effect: NoExecute, tolerationSeconds: 1.5}]\n",
		wantErr: `dataReporting.runtimeExtractor.tolerations[0].tolerationSeconds: Invalid value: 1.5: must be an integer`,
	},
	{
		name: "toleration seconds string", yaml: re + "    tolerations: [{operator: Exists, effect: NoExecute, tolerationSeconds: '30'}]\n",
		wantErr: `dataReporting.runtimeExtractor.tolerations[0].tolerationSeconds: Invalid value: "30": must be an integer`,
	},
	{
		name: "unsupported effect", yaml: re + "    tolerations:\n    - {operator: Exists}\n    - {key: a, operator: Exists, effect: Sometimes}\n",
		wantErr: `dataReporting.runtimeExtractor.tolerations[1].effect: Unsupported value: "Sometimes": supported values: "NoExecute", "NoSchedule", "PreferNoSchedule"`,
	},
	{
		name: "unsupported operator", yaml: re + "    tolerations: [{key: a, operator: In}]\n",
		wantErr: `dataReporting.runtimeExtractor.tolerations[0].operator: Unsupported value: "In": supported values: "Equal", "Exists"`,
	},
	{
		name: "operators are case-sensitive", yaml: re + "    tolerations: [{key: a, operator: exists}]\n",
		wantErr: `dataReporting.runtimeExtractor.tolerations[0].operator: Unsupported value: "exists": supported values: "Equal", "Exists"`,
	},
	{
		name: "Exists with a value", yaml: re + "    tolerations: [{key: a, operator: Exists, value: b}]\n",
		wantErr: `dataReporting.runtimeExtractor.tolerations[0].value: Invalid value: "b": must be empty when operator is "Exists"`,
	},
	{
		name: "Equal without a key", yaml: re + "    tolerations: [{operator: Equal, value: b}]\n",
		wantErr: `dataReporting.runtimeExtractor.tolerations[0].operator: Invalid value: "Equal": must be "Exists" when key is empty, which means "match all values and all keys"`,
	},
	{
		name: "toleration key syntax", yaml: re + "    tolerations: [{key: 'bad key', operator: Exists}]\n",
		wantErr: `dataReporting.runtimeExtractor.tolerations[0].key: Invalid value: "bad key": ` + nameMsg,
	},
	{
		name: "toleration value syntax", yaml: re + "    tolerations: [{key: a, value: 'a b'}]\n",
		wantErr: `dataReporting.runtimeExtractor.tolerations[0].value: Invalid value: "a b": ` + labelMsg,
	},
	{
		name: "toleration seconds without NoExecute", yaml: re + "    tolerations: [{key: a, operator: Exists, effect: NoSchedule, tolerationSeconds: 10}]\n",
		wantErr: `dataReporting.runtimeExtractor.tolerations[0].effect: Invalid value: "NoSchedule": must be "NoExecute" when tolerationSeconds is set`,
	},
	{name: "nodeSelector is a list", yaml: re + "    nodeSelector: [a]\n", wantErr: `dataReporting.runtimeExtractor.nodeSelector: Invalid value: ["a"]: must be a mapping`},
	{name: "nodeSelector value number", yaml: re + "    nodeSelector: {rack: 7}\n", wantErr: `dataReporting.runtimeExtractor.nodeSelector[rack]: Invalid value: 7: must be a string`},
	{name: "nodeSelector value YAML bool", yaml: re + "    nodeSelector: {ssd: yes}\n", wantErr: `dataReporting.runtimeExtractor.nodeSelector[ssd]: Invalid value: true: must be a string`},
	{
		name: "nodeSelector moves off linux", yaml: re + "    nodeSelector: {kubernetes.io/os: windows}\n",
		wantErr: `dataReporting.runtimeExtractor.nodeSelector[kubernetes.io/os]: Invalid value: "windows": must be "linux": the runtime extractor runs only on Linux nodes`,
	},
	{
		name: "nodeSelector empties the OS", yaml: re + "    nodeSelector: {kubernetes.io/os: ''}\n",
		wantErr: `dataReporting.runtimeExtractor.nodeSelector[kubernetes.io/os]: Invalid value: "": must be "linux": the runtime extractor runs only on Linux nodes`,
	},
	{
		name: "nodeSelector key syntax", yaml: re + "    nodeSelector: {'-bad': x}\n",
		wantErr: `dataReporting.runtimeExtractor.nodeSelector[-bad]: Invalid value: "-bad": ` + nameMsg,
	},
	{
		name: "nodeSelector key prefix syntax", yaml: re + "    nodeSelector: {'Example.com/zone': x}\n",
		wantErr: `dataReporting.runtimeExtractor.nodeSelector[Example.com/zone]: Invalid value: "Example.com/zone": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
	},
	{
		name: "nodeSelector value syntax", yaml: re + "    nodeSelector: {zone: 'eu west'}\n",
		wantErr: `dataReporting.runtimeExtractor.nodeSelector[zone]: Invalid value: "eu west": ` + labelMsg,
	},
	{name: "priorityClassName number", yaml: re + "    priorityClassName: 1000\n", wantErr: `dataReporting.runtimeExtractor.priorityClassName: Invalid value: 1000: must be a string`},
	{
		name: "priorityClassName syntax", yaml: re + "    priorityClassName: High_Priority\n",
		wantErr: `dataReporting.runtimeExtractor.priorityClassName: Invalid value: "High_Priority": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
	},
	{
		name: "priorityClassName too long", yaml: re + "    priorityClassName: " + strings.Repeat("a", 254) + "\n",
		wantErr: `dataReporting.runtimeExtractor.priorityClassName: Invalid value: "` + strings.Repeat("a", 254) + `": must be no more than 253 characters`,
	},
	{
		name: "unknown container", yaml: re + "    resources:\n      sidecar: {}\n",
		wantErr: `dataReporting.runtimeExtractor.resources.sidecar: Forbidden: unknown field, supported fields: exporter, extractor, kube-rbac-proxy`,
	},
	{
		name: "resource claims", yaml: re + "    resources:\n      extractor:\n        claims: [{name: gpu}]\n",
		wantErr: `dataReporting.runtimeExtractor.resources.extractor.claims: Forbidden: unknown field, supported fields: limits, requests`,
	},
	{name: "container is a scalar", yaml: re + "    resources:\n      exporter: small\n", wantErr: `dataReporting.runtimeExtractor.resources.exporter: Invalid value: "small": must be a mapping`},
	{name: "limits is a list", yaml: re + "    resources:\n      exporter:\n        limits: [1]\n", wantErr: `dataReporting.runtimeExtractor.resources.exporter.limits: Invalid value: [1]: must be a mapping`},
	{
		name: "quantity syntax", yaml: re + "    resources:\n      extractor:\n        limits: {memory: 1 GB}\n",
		wantErr: `dataReporting.runtimeExtractor.resources.extractor.limits[memory]: Invalid value: "1 GB": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`,
	},
	{
		name: "quantity suffix", yaml: re + "    resources:\n      extractor:\n        limits: {memory: 1GM}\n",
		wantErr: `dataReporting.runtimeExtractor.resources.extractor.limits[memory]: Invalid value: "1GM": unable to parse quantity's suffix`,
	},
	{
		name: "quantity list", yaml: re + "    resources:\n      extractor:\n        requests: {cpu: [1]}\n",
		wantErr: `dataReporting.runtimeExtractor.resources.extractor.requests[cpu]: Invalid value: [1]: must be a quantity, e.g. "100m", "64Mi" or 2`,
	},
	{
		name: "unsupported resource", yaml: re + "    resources:\n      extractor:\n        requests: {memroy: 1Gi}\n",
		wantErr: `dataReporting.runtimeExtractor.resources.extractor.requests[memroy]: Unsupported value: "memroy": supported values: "cpu", "ephemeral-storage", "memory"`,
	},
	{
		name: "negative quantity", yaml: re + "    resources:\n      exporter:\n        limits: {cpu: -100m}\n",
		wantErr: `dataReporting.runtimeExtractor.resources.exporter.limits[cpu]: Invalid value: "-100m": must be greater than or equal to 0`,
	},
	// A request and a limit this large once took a minute to compare: the exponent is kept
	// exactly, and the comparison scales one to the other.
	{
		name: "quantity out of range", yaml: re + "    resources:\n      extractor:\n        requests: {memory: 9223372036854775807Ei}\n        limits: {memory: 184e6744073709551616}\n",
		wantErr: `[dataReporting.runtimeExtractor.resources.extractor.limits[memory]: Invalid value: "184e6744073709551616": the exponent must be between -100 and 100` +
			`, dataReporting.runtimeExtractor.resources.extractor.requests[memory]: Invalid value: "9223372036854775807Ei": must be less than 8Ei]`,
	},
	// ParseQuantity scales by 10^exponent exactly: 1e-99999999 took 44 s, and hung the fuzzer.
	{
		name: "quantity exponent out of range", yaml: re + "    resources:\n      extractor:\n        limits: {cpu: \"1e-9999999\"}\n",
		wantErr: `dataReporting.runtimeExtractor.resources.extractor.limits[cpu]: Invalid value: "1e-9999999": the exponent must be between -100 and 100`,
	},
	{
		name: "request above limit", yaml: re + "    resources:\n      kube-rbac-proxy:\n        requests: {memory: 1Gi}\n        limits: {memory: 512Mi}\n",
		wantErr: `dataReporting.runtimeExtractor.resources.kube-rbac-proxy.requests[memory]: Invalid value: "1Gi": must be less than or equal to memory limit of 512Mi`,
	},
	{
		name: "every decoding error is reported at once",
		yaml: "dataReporting:\n  disableRuntimeExtractor: maybe\n  runtimeExtractor:\n    tolerations: x\n    priorityClassName: [a]\n",
		wantErr: `[dataReporting.disableRuntimeExtractor: Invalid value: "maybe": ` + boolMsg +
			`, dataReporting.runtimeExtractor.tolerations: Invalid value: "x": must be a list` +
			`, dataReporting.runtimeExtractor.priorityClassName: Invalid value: ["a"]: must be a string]`,
	},
	{
		name: "every validation error is reported at once",
		yaml: re + "    tolerations:\n    - {key: a, effect: Sometimes}\n    - {key: b, operator: Exists, value: c}\n    nodeSelector: {kubernetes.io/os: darwin}\n",
		wantErr: `[dataReporting.runtimeExtractor.tolerations[0].effect: Unsupported value: "Sometimes": supported values: "NoExecute", "NoSchedule", "PreferNoSchedule"` +
			`, dataReporting.runtimeExtractor.tolerations[1].value: Invalid value: "c": must be empty when operator is "Exists"` +
			`, dataReporting.runtimeExtractor.nodeSelector[kubernetes.io/os]: Invalid value: "darwin": must be "linux": the runtime extractor runs only on Linux nodes]`,
	},
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range invalidCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.yaml))
			require.Error(t, err)
			assert.Nil(t, got)
			assert.Equal(t, tc.wantErr, err.Error())
		})
	}
}

func TestParseToleratesUnknownFieldsOutsideRuntimeExtractor(t *testing.T) {
	got, err := Parse([]byte(`
dataReporting:
  someFutureSetting: {nested: [1, 2]}
  disableRuntimeExtractor: "True"
sca: {disabled: true}
1: numeric key
`))
	require.NoError(t, err)
	assertConfigEqual(t, disabled(true), got)
}

func TestFromConfigMap(t *testing.T) {
	cm := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: ConfigMapName},
			Data:       data,
		}
	}
	t.Run("nil ConfigMap is the default", func(t *testing.T) {
		got, err := FromConfigMap(nil)
		require.NoError(t, err)
		assertConfigEqual(t, Default(), got)
	})
	t.Run("missing key is the default", func(t *testing.T) {
		got, err := FromConfigMap(cm(map[string]string{"other.yaml": "dataReporting: {disableRuntimeExtractor: true}"}))
		require.NoError(t, err)
		assertConfigEqual(t, Default(), got)
	})
	t.Run("key is parsed", func(t *testing.T) {
		got, err := FromConfigMap(cm(map[string]string{ConfigKey: "dataReporting: {disableRuntimeExtractor: true}"}))
		require.NoError(t, err)
		assertConfigEqual(t, disabled(true), got)
	})
	t.Run("error names the ConfigMap and the field", func(t *testing.T) {
		got, err := FromConfigMap(cm(map[string]string{ConfigKey: "dataReporting: {disableRuntimeExtractor: 2}"}))
		require.Error(t, err)
		assert.Nil(t, got)
		assert.Equal(t, `invalid config.yaml in ConfigMap openshift-insights/insights-config: `+
			`dataReporting.disableRuntimeExtractor: Invalid value: 2: `+boolMsg, err.Error())
	})
}

func TestDeepCopyIsIndependent(t *testing.T) {
	orig := fullExample()
	cp := orig.DeepCopy()
	assertConfigEqual(t, orig, cp)

	re := &cp.DataReporting.RuntimeExtractor
	re.Tolerations[0].Key = "changed"
	re.NodeSelector["new"] = "label"
	re.Resources.Extractor.Limits[corev1.ResourceCPU] = resource.MustParse("9")
	assertConfigEqual(t, fullExample(), orig)
	assert.Nil(t, (*InsightsConfiguration)(nil).DeepCopy())
}

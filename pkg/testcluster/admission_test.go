package testcluster_test

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	securityv1 "github.com/openshift/api/security/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// hostSCCFile is the host's SCC, with the ClusterRole and binding that grant
// its use, as the host ships them.
const hostSCCFile = "testdata/host-scc.yaml"

// The SCC policy's manifest decodes strictly, denies, fails closed, and every
// refusal has a message.
func TestSCCPolicyManifest(t *testing.T) {
	policy, binding, err := testcluster.SCCPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if got := binding.Spec.ValidationActions; !slices.Equal(got, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding validationActions = %v, want [Deny]", got)
	}
	if fp := policy.Spec.FailurePolicy; fp == nil || *fp != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy = %v, want Fail", fp)
	}
	for i, v := range policy.Spec.Validations {
		if v.Reason == nil || *v.Reason != metav1.StatusReasonForbidden || v.MessageExpression == "" {
			t.Errorf("validation %d: reason %v, messageExpression %q; want Forbidden, with a message", i, v.Reason, v.MessageExpression)
		}
	}
	seen := map[string]bool{}
	for _, v := range policy.Spec.Variables {
		if seen[v.Name] {
			t.Errorf("variable %s defined twice", v.Name)
		}
		seen[v.Name] = true
	}
}

// hostSCCDocument is the SCC document of the host's file, as plain YAML: the
// test reads its fields without the code under test.
func hostSCCDocument(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(hostSCCFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%s: %v", hostSCCFile, err)
		}
		if m["kind"] == "SecurityContextConstraints" {
			return m
		}
	}
	t.Fatalf("%s has no SecurityContextConstraints", hostSCCFile)
	return nil
}

// The policy's facts are the host's SCC's, field by field, as the SCC
// defaults them: an unset boolean is false, an unset list allows nothing,
// unset volumes allow every type. The e2e tests turn some of them.
func TestSCCPolicyFactsAreTheHostSCCs(t *testing.T) {
	policy, _, err := testcluster.SCCPolicy()
	if err != nil {
		t.Fatal(err)
	}
	scc := hostSCCDocument(t)
	boolean := func(field string) string {
		v, ok := scc[field]
		if !ok {
			return "false"
		}
		b, isBool := v.(bool)
		if !isBool {
			t.Fatalf("%s: %v is not a boolean", field, v)
		}
		return strconv.FormatBool(b)
	}
	list := func(field, unset string) string {
		v, ok := scc[field]
		if !ok {
			return unset
		}
		var names []string
		for _, n := range v.([]any) {
			names = append(names, "'"+n.(string)+"'")
		}
		return "[" + strings.Join(names, ", ") + "]"
	}
	want := map[string]string{
		"sccName":                  "'" + scc["metadata"].(map[string]any)["name"].(string) + "'",
		"allowPrivilegedContainer": boolean("allowPrivilegedContainer"),
		"allowHostPID":             boolean("allowHostPID"),
		"allowHostNetwork":         boolean("allowHostNetwork"),
		"allowHostIPC":             boolean("allowHostIPC"),
		"allowHostPorts":           boolean("allowHostPorts"),
		"allowHostDirVolumePlugin": boolean("allowHostDirVolumePlugin"),
		"allowedCapabilities":      list("allowedCapabilities", "[]"),
		"seccompProfiles":          list("seccompProfiles", "[]"),
	}
	if _, ok := scc["volumes"]; ok {
		// Listed volumes are defaulted with allowHostDirVolumePlugin:
		// TestSCCFactsDefaulting covers it; compare through that here.
		t.Fatalf("the host's SCC now lists volumes; compare allowedVolumeTypes with the cases of TestSCCFactsDefaulting")
	}
	want["allowedVolumeTypes"] = "['*']"

	facts := map[string]string{}
	for i, v := range policy.Spec.Variables {
		if i >= len(want) {
			break
		}
		facts[v.Name] = v.Expression
	}
	for name, expr := range want {
		got, ok := facts[name]
		switch {
		case !ok:
			t.Errorf("fact %s is not among the policy's first %d variables", name, len(want))
		case got != expr:
			t.Errorf("fact %s = %s, want %s (the host's SCC)", name, got, expr)
		}
	}
	t.Logf("the host's SCC as facts: %v", facts)
}

func decodeSCC(t *testing.T, doc string) *securityv1.SecurityContextConstraints {
	t.Helper()
	scc := &securityv1.SecurityContextConstraints{}
	if err := yaml.UnmarshalStrict([]byte("apiVersion: security.openshift.io/v1\nkind: SecurityContextConstraints\nmetadata:\n  name: s\n"+doc), scc); err != nil {
		t.Fatal(err)
	}
	return scc
}

// SCCFacts defaults an SCC as OpenShift does.
func TestSCCFactsDefaulting(t *testing.T) {
	for i, tc := range []struct {
		scc  string
		want map[string]string
	}{
		{"", map[string]string{
			"sccName": "'s'", "allowPrivilegedContainer": "false", "allowHostPID": "false", "allowHostNetwork": "false",
			"allowHostIPC": "false", "allowHostPorts": "false", "allowHostDirVolumePlugin": "false",
			"allowedCapabilities": "[]", "allowedVolumeTypes": "['*']", "seccompProfiles": "[]",
		}},
		{"allowHostNetwork: true\nallowHostIPC: true\nallowHostPorts: true\nallowPrivilegedContainer: true\n", map[string]string{
			"allowHostNetwork": "true", "allowHostIPC": "true", "allowHostPorts": "true", "allowPrivilegedContainer": "true",
			"allowHostPID": "false",
		}},
		{"allowedCapabilities: [NET_ADMIN, CAP_SYS_ADMIN]\nseccompProfiles: ['*']\n", map[string]string{
			"allowedCapabilities": "['NET_ADMIN', 'CAP_SYS_ADMIN']", "seccompProfiles": "['*']",
		}},
		// An empty list allows no volume, but allowHostDirVolumePlugin wins.
		{"volumes: []\nallowHostDirVolumePlugin: true\n", map[string]string{"allowedVolumeTypes": "['hostPath']"}},
		{"volumes: []\n", map[string]string{"allowedVolumeTypes": "[]"}},
		{"volumes: [none]\n", map[string]string{"allowedVolumeTypes": "[]"}},
		// '*' without allowHostDirVolumePlugin: every type but hostPath.
		{"volumes: ['*']\n", map[string]string{"allowedVolumeTypes": "['*']", "allowHostDirVolumePlugin": "false"}},
		{"volumes: [secret, hostPath, configMap]\n", map[string]string{"allowedVolumeTypes": "['configMap', 'secret']"}},
		{"volumes: [secret]\nallowHostDirVolumePlugin: true\n", map[string]string{"allowedVolumeTypes": "['hostPath', 'secret']"}},
		// The strategies the policy has no rule for refuse nothing as RunAsAny.
		{"runAsUser: {type: RunAsAny}\nseLinuxContext: {type: RunAsAny}\nfsGroup: {type: RunAsAny}\nsupplementalGroups: {type: RunAsAny}\n" +
			"allowPrivilegeEscalation: true\nuserNamespaceLevel: AllowHostLevel\npriority: 10\n",
			map[string]string{"sccName": "'s'"}},
	} {
		facts, err := testcluster.SCCFacts(decodeSCC(t, tc.scc))
		if err != nil {
			t.Errorf("#%d: %v", i, err)
			continue
		}
		got := map[string]string{}
		for _, f := range facts {
			got[f.Name] = f.Expression
		}
		for name, want := range tc.want {
			if got[name] != want {
				t.Errorf("#%d %q: %s = %q, want %q", i, tc.scc, name, got[name], want)
			}
		}
	}
}

// An SCC that sets what the policy does not emulate cannot become a policy
// that would pass it unjudged.
func TestSCCFactsRefuseWhatIsNotEmulated(t *testing.T) {
	for i, tc := range []struct{ scc, words string }{
		{"requiredDropCapabilities: [KILL]\n", "requiredDropCapabilities"},
		{"defaultAddCapabilities: [CHOWN]\n", "defaultAddCapabilities"},
		{"runAsUser: {type: MustRunAsRange}\n", "RunAsAny"},
		{"seLinuxContext: {type: MustRunAs}\n", "RunAsAny"},
		{"fsGroup: {type: MustRunAs}\n", "RunAsAny"},
		{"readOnlyRootFilesystem: true\n", "readOnlyRootFilesystem"},
		{"allowPrivilegeEscalation: false\n", "allowPrivilegeEscalation"},
		{"users: [system:admin]\n", "users and groups"},
		{"groups: [system:authenticated]\n", "users and groups"},
		{"forbiddenSysctls: ['*']\n", "forbiddenSysctls"},
		{"userNamespaceLevel: RequirePodLevel\n", "userNamespaceLevel"},
		{"allowedCapabilities: [\"NET_ADMIN'\"]\n", "not a name"},
	} {
		_, err := testcluster.SCCFacts(decodeSCC(t, tc.scc))
		if err == nil || !strings.Contains(err.Error(), tc.words) {
			t.Errorf("#%d %q: error %v, want one saying %q", i, tc.scc, err, tc.words)
		}
	}
}

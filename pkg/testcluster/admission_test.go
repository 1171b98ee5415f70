package testcluster_test

import (
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// The SCC policy's manifest decodes strictly, denies, fails closed, and
// carries the SCC's facts as the variables its rules read (the e2e tests turn
// some of them).
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
	facts := map[string]string{
		"allowedCapabilities":      "['CAP_SYS_ADMIN']",
		"allowPrivilegedContainer": "true",
		"allowHostPID":             "true",
		"allowHostNetwork":         "false",
		"allowHostIPC":             "false",
		"allowHostPorts":           "false",
		"allowedVolumeTypes":       "['*']",
		"seccompProfiles":          "['runtime/default']",
	}
	for _, v := range policy.Spec.Variables {
		if want, ok := facts[v.Name]; ok {
			if v.Expression != want {
				t.Errorf("variable %s = %s, want %s", v.Name, v.Expression, want)
			}
			delete(facts, v.Name)
		}
	}
	if len(facts) != 0 {
		t.Errorf("variables missing: %v", facts)
	}
	for i, v := range policy.Spec.Validations {
		if v.Reason == nil || *v.Reason != metav1.StatusReasonForbidden || v.MessageExpression == "" {
			t.Errorf("validation %d: reason %v, messageExpression %q; want Forbidden, with a message", i, v.Reason, v.MessageExpression)
		}
	}
}

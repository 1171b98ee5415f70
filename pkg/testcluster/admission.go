package testcluster

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

// SCCPolicyName names the ValidatingAdmissionPolicy, and its binding, that
// enforce the SCC insights-runtime-extractor-scc on the local cluster (see
// admission/insights-runtime-extractor-scc.yaml).
const SCCPolicyName = "insights-runtime-extractor-scc"

// sccName is the SCC the runtime extractor's pod template requires.
const sccName = "insights-runtime-extractor-scc"

//go:embed admission/insights-runtime-extractor-scc.yaml
var sccPolicyYAML []byte

// SCCPolicy returns the policy and the binding that the local cluster installs
// in its place, fresh on every call.
func SCCPolicy() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	docs, err := yamlDocuments(sccPolicyYAML)
	if err != nil {
		return nil, nil, err
	}
	if len(docs) != 2 {
		return nil, nil, fmt.Errorf("SCC policy manifest: %d documents, want the policy and its binding", len(docs))
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	// Strict: a misspelt field would otherwise vanish, and with it a rule.
	if err := yaml.UnmarshalStrict(docs[0], policy); err != nil {
		return nil, nil, fmt.Errorf("SCC policy manifest: policy: %w", err)
	}
	if err := yaml.UnmarshalStrict(docs[1], binding); err != nil {
		return nil, nil, fmt.Errorf("SCC policy manifest: binding: %w", err)
	}
	if policy.Kind != "ValidatingAdmissionPolicy" || binding.Kind != "ValidatingAdmissionPolicyBinding" ||
		policy.Name != SCCPolicyName || binding.Spec.PolicyName != SCCPolicyName {
		return nil, nil, fmt.Errorf("SCC policy manifest: want the policy %s and its binding, got %s %s and %s for %s",
			SCCPolicyName, policy.Kind, policy.Name, binding.Kind, binding.Spec.PolicyName)
	}
	return policy, binding, nil
}

func yamlDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("split YAML documents: %w", err)
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
}

// installSCCPolicy creates (or, on a reused Dir, replaces) the SCC policy and
// its binding, and returns once the API server enforces them: it loads
// policies asynchronously, and a controller started right after Start must
// already be judged.
func (c *Cluster) installSCCPolicy(ctx context.Context) error {
	policy, binding, err := SCCPolicy()
	if err != nil {
		return err
	}
	api := c.client.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := api.ValidatingAdmissionPolicies().Get(ctx, policy.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec = policy.Spec
			_, err = api.ValidatingAdmissionPolicies().Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("update ValidatingAdmissionPolicy %s: %w", policy.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("create ValidatingAdmissionPolicy %s: %w", policy.Name, err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := api.ValidatingAdmissionPolicyBindings().Get(ctx, binding.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec = binding.Spec
			_, err = api.ValidatingAdmissionPolicyBindings().Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("update ValidatingAdmissionPolicyBinding %s: %w", binding.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("create ValidatingAdmissionPolicyBinding %s: %w", binding.Name, err)
	}
	return c.waitFor(ctx, "SCC policy "+SCCPolicyName+" enforced", time.Minute, c.sccPolicyEnforced)
}

// sccPolicyEnforced reports whether a dry-run create of a DaemonSet that the
// SCC refuses (it adds the capability SYS_ADMIN, which the SCC names
// CAP_SYS_ADMIN) is refused by the policy.
func (c *Cluster) sccPolicyEnforced(ctx context.Context) (bool, error) {
	labels := map[string]string{"app": "scc-policy-probe"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "scc-policy-probe", Namespace: InsightsNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      labels,
					Annotations: map[string]string{"openshift.io/required-scc": sccName},
				},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "probe", Image: "quay.io/example/probe:latest",
					SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}},
				}}},
			},
		},
	}
	_, err := c.client.AppsV1().DaemonSets(InsightsNamespace).Create(ctx, ds, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), SCCPolicyName):
		return true, nil
	default:
		return false, err
	}
}

package testcluster

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	securityv1 "github.com/openshift/api/security/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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

// HostSCCClusterRole names the host's ClusterRole that grants use of the SCC;
// the local cluster binds it, as the host does, to the extractor's
// ServiceAccount.
const HostSCCClusterRole = "insights-runtime-extractor-role"

//go:embed admission/insights-runtime-extractor-scc.yaml
var sccPolicyYAML []byte

// hostSCCYAML is the host's SCC for the runtime extractor, and the ClusterRole
// and binding that grant its ServiceAccount use of it, as the host ships them
// (the file's header says where from).
//
//go:embed testdata/host-scc.yaml
var hostSCCYAML []byte

// SCCPolicy returns the policy and the binding that the local cluster installs
// in its place, fresh on every call. The policy's facts (the variables its
// rules read: allowedCapabilities, allowHostPID, ...) are those of the host's
// SCC, after the SCC's own defaulting; they come first among its variables.
func SCCPolicy() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	host, err := parseHostSCC(hostSCCYAML)
	if err != nil {
		return nil, nil, err
	}
	facts, err := SCCFacts(host.scc)
	if err != nil {
		return nil, nil, err
	}
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
	for _, v := range policy.Spec.Variables {
		if slices.ContainsFunc(facts, func(f admissionregistrationv1.Variable) bool { return f.Name == v.Name }) {
			return nil, nil, fmt.Errorf("SCC policy manifest: variable %s is a fact of the SCC; it comes from the host's SCC, not from the manifest", v.Name)
		}
	}
	// Facts first: a variable reads only those before it.
	policy.Spec.Variables = append(facts, policy.Spec.Variables...)
	return policy, binding, nil
}

// SCCFacts returns the facts of scc that the policy's rules read, as the
// policy's variables, after the SCC's defaulting as OpenShift applies it: an
// unset boolean is false, unset capability and seccomp lists allow nothing,
// unset volumes allow every type, allowHostDirVolumePlugin adds or removes
// hostPath. An SCC that sets what the policy does not emulate (user, group and
// SELinux strategies other than RunAsAny, dropped or default capabilities,
// ...) is an error: such a change to the host's SCC must fail the build of the
// policy, not pass unjudged.
func SCCFacts(scc *securityv1.SecurityContextConstraints) ([]admissionregistrationv1.Variable, error) {
	if err := emulated(scc); err != nil {
		return nil, fmt.Errorf("SCC %s: %w", scc.Name, err)
	}
	volumes := map[string]bool{}
	switch {
	case scc.Volumes == nil:
		volumes[string(securityv1.FSTypeAll)] = true
	default:
		for _, v := range scc.Volumes {
			volumes[string(v)] = true
		}
	}
	// "none" allows nothing; hostPath follows allowHostDirVolumePlugin, which
	// also narrows "*" to every type but hostPath (the allowHostDirVolumePlugin
	// fact, which the rule reads beside this list).
	delete(volumes, string(securityv1.FSTypeNone))
	delete(volumes, string(securityv1.FSTypeHostPath))
	if scc.AllowHostDirVolumePlugin && !volumes[string(securityv1.FSTypeAll)] {
		volumes[string(securityv1.FSTypeHostPath)] = true
	}
	capabilities := make([]string, len(scc.AllowedCapabilities))
	for i, c := range scc.AllowedCapabilities {
		capabilities[i] = string(c)
	}
	lists := []struct {
		name   string
		values []string
	}{
		{"allowedCapabilities", capabilities},
		{"allowedVolumeTypes", slices.Sorted(maps.Keys(volumes))},
		{"seccompProfiles", scc.SeccompProfiles},
	}
	vars := []admissionregistrationv1.Variable{{Name: "sccName", Expression: "'" + scc.Name + "'"}}
	for _, f := range []struct {
		name  string
		value bool
	}{
		{"allowPrivilegedContainer", scc.AllowPrivilegedContainer},
		{"allowHostPID", scc.AllowHostPID},
		{"allowHostNetwork", scc.AllowHostNetwork},
		{"allowHostIPC", scc.AllowHostIPC},
		{"allowHostPorts", scc.AllowHostPorts},
		{"allowHostDirVolumePlugin", scc.AllowHostDirVolumePlugin},
	} {
		vars = append(vars, admissionregistrationv1.Variable{Name: f.name, Expression: strconv.FormatBool(f.value)})
	}
	for _, l := range lists {
		expr, err := celStrings(l.values)
		if err != nil {
			return nil, fmt.Errorf("SCC %s: %s: %w", scc.Name, l.name, err)
		}
		vars = append(vars, admissionregistrationv1.Variable{Name: l.name, Expression: expr})
	}
	return vars, nil
}

// emulated returns an error naming the first setting of scc that the policy
// does not emulate.
func emulated(scc *securityv1.SecurityContextConstraints) error {
	runAsAny := func(t string) bool { return t == "" || t == "RunAsAny" }
	switch {
	case !validName.MatchString(scc.Name):
		return fmt.Errorf("name %q", scc.Name)
	case len(scc.DefaultAddCapabilities) > 0:
		return errors.New("defaultAddCapabilities are not emulated")
	case len(scc.RequiredDropCapabilities) > 0:
		return errors.New("requiredDropCapabilities are not emulated")
	case len(scc.AllowedFlexVolumes) > 0:
		return errors.New("allowedFlexVolumes are not emulated")
	case scc.UserNamespaceLevel != "" && scc.UserNamespaceLevel != securityv1.NamespaceLevelAllowHost:
		return fmt.Errorf("userNamespaceLevel %s is not emulated", scc.UserNamespaceLevel)
	case scc.AllowPrivilegeEscalation != nil && !*scc.AllowPrivilegeEscalation:
		return errors.New("allowPrivilegeEscalation false is not emulated")
	case scc.ReadOnlyRootFilesystem:
		return errors.New("readOnlyRootFilesystem is not emulated")
	case !runAsAny(string(scc.RunAsUser.Type)) || !runAsAny(string(scc.SELinuxContext.Type)) ||
		!runAsAny(string(scc.FSGroup.Type)) || !runAsAny(string(scc.SupplementalGroups.Type)):
		return errors.New("only RunAsAny strategies (runAsUser, seLinuxContext, fsGroup, supplementalGroups) are emulated")
	case len(scc.Users) > 0 || len(scc.Groups) > 0:
		// They grant use, as RBAC does; the policy asks RBAC only.
		return errors.New("users and groups are not emulated; grant use through RBAC")
	case len(scc.ForbiddenSysctls) > 0:
		return errors.New("forbiddenSysctls are not emulated")
	}
	return nil
}

// validName is what may go into a CEL string literal unquoted: the names of
// SCCs, capabilities, volume types and seccomp profiles.
var validName = regexp.MustCompile(`^[A-Za-z0-9_.*/-]+$`)

// celStrings is the CEL list literal of values, in their order.
func celStrings(values []string) (string, error) {
	quoted := make([]string, len(values))
	for i, v := range values {
		if !validName.MatchString(v) {
			return "", fmt.Errorf("%q is not a name", v)
		}
		quoted[i] = "'" + v + "'"
	}
	return "[" + strings.Join(quoted, ", ") + "]", nil
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

// InstallSCCPolicy creates, or puts back as SCCPolicy and the host's
// documents have them, the host's ClusterRole and ClusterRoleBinding that grant
// the extractor's ServiceAccount use of its SCC, and the SCC policy and its
// binding; it returns once the API server enforces them as they are: it loads
// policies and RBAC asynchronously, and a controller started right after must
// already be judged. Start calls it; a test that replaced the policy calls it
// to restore it.
func (c *Cluster) InstallSCCPolicy(ctx context.Context) error {
	host, err := parseHostSCC(hostSCCYAML)
	if err != nil {
		return err
	}
	policy, binding, err := SCCPolicy()
	if err != nil {
		return err
	}
	if err := c.applyHostRBAC(ctx, host); err != nil {
		return err
	}
	api := c.client.AdmissionregistrationV1()
	if err := createOrPutBack(ctx, api.ValidatingAdmissionPolicies(), "ValidatingAdmissionPolicy", policy,
		func(cur, want *admissionregistrationv1.ValidatingAdmissionPolicy) { cur.Spec = want.Spec }); err != nil {
		return err
	}
	if err := createOrPutBack(ctx, api.ValidatingAdmissionPolicyBindings(), "ValidatingAdmissionPolicyBinding", binding,
		func(cur, want *admissionregistrationv1.ValidatingAdmissionPolicyBinding) { cur.Spec = want.Spec }); err != nil {
		return err
	}
	return c.waitFor(ctx, "SCC policy "+SCCPolicyName+" enforced", time.Minute, c.sccPolicyEnforced)
}

// applyHostRBAC creates the host's ClusterRole and ClusterRoleBinding, or puts
// back their rules and subjects.
func (c *Cluster) applyHostRBAC(ctx context.Context, host *hostSCC) error {
	rbac := c.client.RbacV1()
	if err := createOrPutBack(ctx, rbac.ClusterRoles(), "ClusterRole", host.role,
		func(cur, want *rbacv1.ClusterRole) { cur.Rules = want.Rules }); err != nil {
		return err
	}
	// The roleRef cannot change; the host's names it, as a reused Dir's does.
	return createOrPutBack(ctx, rbac.ClusterRoleBindings(), "ClusterRoleBinding", host.binding,
		func(cur, want *rbacv1.ClusterRoleBinding) { cur.Subjects = want.Subjects })
}

// objectClient is what createOrPutBack needs of a typed client.
type objectClient[T metav1.Object] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Get(context.Context, string, metav1.GetOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
}

// createOrPutBack creates obj or, where it exists (a reused Dir, a test that
// changed it), puts back into the live object what putBack copies from obj.
func createOrPutBack[T metav1.Object](ctx context.Context, client objectClient[T], kind string, obj T, putBack func(cur, want T)) error {
	_, err := client.Create(ctx, obj, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create %s %s: %w", kind, obj.GetName(), err)
		}
		return nil
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := client.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		putBack(cur, obj)
		_, err = client.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("update %s %s: %w", kind, obj.GetName(), err)
	}
	return nil
}

// sccPolicyEnforced reports whether the policy, as SCCPolicy builds it, is in
// force: a dry-run create of a DaemonSet that the SCC refuses (it adds the
// capability SYS_ADMIN, which the SCC names CAP_SYS_ADMIN) is refused by the
// policy, and one that it allows, run by the ServiceAccount the host grants
// use of the SCC, is admitted (RBAC, too, is loaded asynchronously).
func (c *Cluster) sccPolicyEnforced(ctx context.Context) (bool, error) {
	refused, allowed := sccProbe(corev1.Capability("SYS_ADMIN")), sccProbe(corev1.Capability("CAP_SYS_ADMIN"))
	refused.Name += "-refused"
	dss := c.client.AppsV1().DaemonSets(InsightsNamespace)
	_, err := dss.Create(ctx, refused, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		return false, nil
	case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), SCCPolicyName):
		return false, err
	case !strings.Contains(err.Error(), "capability may not be added"):
		return false, nil // an older version of the policy, or no use granted yet
	}
	_, err = dss.Create(ctx, allowed, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), SCCPolicyName):
		return false, nil // the binding of the host's ClusterRole not loaded yet
	default:
		return false, err
	}
}

// sccProbe is a DaemonSet that requires the SCC, run by the ServiceAccount the
// host grants use of it, whose one container adds the capability add.
func sccProbe(add corev1.Capability) *appsv1.DaemonSet {
	labels := map[string]string{"app": "scc-policy-probe"}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "scc-policy-probe", Namespace: InsightsNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      labels,
					Annotations: map[string]string{securityv1.RequiredSCCAnnotation: sccName},
				},
				Spec: corev1.PodSpec{
					ServiceAccountName: InsightsServiceAccount,
					Containers: []corev1.Container{{
						Name: "probe", Image: "quay.io/example/probe:latest",
						SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{add}}},
					}},
				},
			},
		},
	}
}

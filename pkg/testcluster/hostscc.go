package testcluster

import (
	"errors"
	"fmt"
	"slices"

	securityv1 "github.com/openshift/api/security/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// hostSCC is what the host ships for the runtime extractor's SCC.
type hostSCC struct {
	scc     *securityv1.SecurityContextConstraints
	role    *rbacv1.ClusterRole
	binding *rbacv1.ClusterRoleBinding
}

// parseHostSCC decodes, strictly, the host's SCC, ClusterRole and
// ClusterRoleBinding, and checks that they are what the policy stands for: the
// SCC the extractor requires, and a binding of the role that grants its
// ServiceAccount use of it.
func parseHostSCC(data []byte) (*hostSCC, error) {
	docs, err := yamlDocuments(data)
	if err != nil {
		return nil, fmt.Errorf("host SCC: %w", err)
	}
	h := &hostSCC{}
	for i, doc := range docs {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("host SCC: document %d: %w", i, err)
		}
		var into any
		switch {
		case meta.Kind == "":
			continue // comments only
		case meta.Kind == "SecurityContextConstraints" && h.scc == nil:
			h.scc = &securityv1.SecurityContextConstraints{}
			into = h.scc
		case meta.Kind == "ClusterRole" && h.role == nil:
			h.role = &rbacv1.ClusterRole{}
			into = h.role
		case meta.Kind == "ClusterRoleBinding" && h.binding == nil:
			h.binding = &rbacv1.ClusterRoleBinding{}
			into = h.binding
		default:
			return nil, fmt.Errorf("host SCC: document %d: unexpected %s %s", i, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			return nil, fmt.Errorf("host SCC: %s: %w", meta.Kind, err)
		}
	}
	if h.scc == nil || h.role == nil || h.binding == nil {
		return nil, errors.New("host SCC: want a SecurityContextConstraints, a ClusterRole and a ClusterRoleBinding")
	}
	if h.scc.Name != sccName {
		return nil, fmt.Errorf("host SCC: the SCC is %s, want %s", h.scc.Name, sccName)
	}
	if h.role.Name != HostSCCClusterRole || !grantsUse(h.role.Rules, sccName) {
		return nil, fmt.Errorf("host SCC: want ClusterRole %s granting use of %s, got %s", HostSCCClusterRole, sccName, h.role.Name)
	}
	sa := slices.ContainsFunc(h.binding.Subjects, func(s rbacv1.Subject) bool {
		return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == InsightsNamespace && s.Name == InsightsServiceAccount
	})
	if h.binding.RoleRef.Kind != "ClusterRole" || h.binding.RoleRef.Name != h.role.Name || !sa {
		return nil, fmt.Errorf("host SCC: ClusterRoleBinding %s does not bind ClusterRole %s to ServiceAccount %s/%s",
			h.binding.Name, h.role.Name, InsightsNamespace, InsightsServiceAccount)
	}
	return h, nil
}

// grantsUse reports whether rules grant use of the SCC name.
func grantsUse(rules []rbacv1.PolicyRule, name string) bool {
	has := func(list []string, want string) bool {
		return slices.Contains(list, want) || slices.Contains(list, rbacv1.ResourceAll)
	}
	for _, r := range rules {
		if has(r.APIGroups, securityv1.GroupName) && has(r.Resources, "securitycontextconstraints") && has(r.Verbs, "use") &&
			(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name)) {
			return true
		}
	}
	return false
}

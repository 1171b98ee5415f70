package runtimeextractor

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// podPageSize is how many pods one list request of the diagnosis returns.
// A DaemonSet has a pod per node, up to 2,000 on OpenShift's largest
// clusters; one unpaged list of them is tens of megabytes decoded at once,
// in the host's process, while the cluster is at its busiest. A page of 500
// bounds that to a quarter of it at most, in 4 requests at 2,000 nodes.
const podPageSize = 500

// notReadyNodesOf reads ds's pods a page at a time and returns up to
// maxStuckNodes nodes (sorted) whose pod is not ready. Only a few names
// outlive each page, so what it keeps does not grow with the node count.
func notReadyNodesOf(ctx context.Context, client kubernetes.Interface, ds *appsv1.DaemonSet) ([]string, error) {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	opts := metav1.ListOptions{LabelSelector: selector.String(), Limit: podPageSize}
	var nodes []string
	for {
		page, err := client.CoreV1().Pods(ds.Namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list pods of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		for i := range page.Items {
			if pod := &page.Items[i]; pod.Spec.NodeName != "" && ownedBy(pod, ds) && !podReady(pod) {
				nodes = append(nodes, pod.Spec.NodeName)
			}
		}
		nodes = fewestNames(nodes)
		if page.Continue == "" {
			return nodes, nil
		}
		opts.Continue = page.Continue
	}
}

// ownedBy: an owner reference of pod has ds's UID.
func ownedBy(pod *corev1.Pod, ds *appsv1.DaemonSet) bool {
	return slices.ContainsFunc(pod.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == ds.UID })
}

// fewestNames sorts names, drops repeats and keeps the first maxStuckNodes.
func fewestNames(names []string) []string {
	slices.Sort(names)
	names = slices.Compact(names)
	return names[:min(len(names), maxStuckNodes)]
}

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

// podPageSize: a DaemonSet has a pod per node, up to 2,000 on OpenShift's
// largest clusters, and an unpaged list of them is tens of megabytes decoded
// at once in the host's process, while the cluster is at its busiest.
const podPageSize = 500

// notReadyNodesOf returns up to maxStuckNodes nodes (sorted) whose pod of ds
// is not ready; only a few names outlive each page.
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

func ownedBy(pod *corev1.Pod, ds *appsv1.DaemonSet) bool {
	return slices.ContainsFunc(pod.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == ds.UID })
}

// fewestNames sorts names, drops repeats and keeps the first maxStuckNodes.
func fewestNames(names []string) []string {
	slices.Sort(names)
	names = slices.Compact(names)
	return names[:min(len(names), maxStuckNodes)]
}

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

// podPageSize: a DaemonSet has a pod per node, up to 2,000 on OpenShift's largest clusters; an
// unpaged list is tens of megabytes decoded at once in the host's process, at its busiest.
const podPageSize = 500

// notReadyNodesOf returns up to maxStuckNodes nodes (sorted) whose pod of ds is not ready; only a
// few names outlive each page.
func notReadyNodesOf(ctx context.Context, client kubernetes.Interface, ds *appsv1.DaemonSet) ([]string, error) {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	opts := metav1.ListOptions{LabelSelector: selector.String(), Limit: podPageSize}
	owned := func(r metav1.OwnerReference) bool { return r.UID == ds.UID }
	var nodes []string
	for {
		page, err := client.CoreV1().Pods(ds.Namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list pods of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		for i := range page.Items {
			if pod := &page.Items[i]; pod.Spec.NodeName != "" && slices.ContainsFunc(pod.OwnerReferences, owned) && !podReady(pod) {
				nodes = append(nodes, pod.Spec.NodeName)
			}
		}
		slices.Sort(nodes)
		nodes = slices.Compact(nodes)
		nodes = nodes[:min(len(nodes), maxStuckNodes)]
		if page.Continue == "" {
			return nodes, nil
		}
		opts.Continue = page.Continue
	}
}

// podReady: the first Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
	return i >= 0 && pod.Status.Conditions[i].Status == corev1.ConditionTrue
}

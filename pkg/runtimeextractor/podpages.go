package runtimeextractor

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// podPageSize is how many pods one list request of the diagnosis returns.
// A DaemonSet has a pod per node, up to 2,000 on OpenShift's largest
// clusters; one unpaged JSON list of them is tens of megabytes decoded at
// once, in the host's process, while the cluster is at its busiest. A page
// of 500 bounds that to a quarter of it at most, in 4 requests at 2,000 nodes.
const podPageSize = 500

// notReadyNodesOf reads ds's pods page by page, in protobuf where the client
// speaks it, and returns up to maxStuckNodes nodes (sorted) whose pod is not
// ready or not of the current generation. It keeps no more than those names
// between pages, so its memory does not grow with the node count.
func notReadyNodesOf(ctx context.Context, client kubernetes.Interface, ds *appsv1.DaemonSet) ([]string, error) {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	opts := metav1.ListOptions{LabelSelector: selector.String(), Limit: podPageSize}
	var nodes []string
	for {
		page, err := listPodPage(ctx, client, ds.Namespace, opts)
		if err != nil {
			return nil, fmt.Errorf("list pods of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		nodes = fewestNames(append(nodes, notReadyNodes(page.Items, ds)...))
		if page.Continue == "" {
			return nodes, nil
		}
		opts.Continue = page.Continue
	}
}

// listPodPage lists one page of pods, asking for protobuf, which the API
// server encodes and the client decodes at a fraction of JSON's cost. A
// fake clientset has no REST client and lists as it does.
func listPodPage(ctx context.Context, client kubernetes.Interface, namespace string, opts metav1.ListOptions) (*corev1.PodList, error) {
	rc, ok := client.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil {
		return client.CoreV1().Pods(namespace).List(ctx, opts)
	}
	pods := &corev1.PodList{}
	err := rc.Get().Namespace(namespace).Resource("pods").
		VersionedParams(&opts, scheme.ParameterCodec).
		SetHeader("Accept", runtime.ContentTypeProtobuf+", "+runtime.ContentTypeJSON).
		Do(ctx).Into(pods)
	return pods, err
}

// notReadyNodes returns up to maxStuckNodes nodes (sorted) whose pod of ds is
// not ready or not of the current generation.
func notReadyNodes(pods []corev1.Pod, ds *appsv1.DaemonSet) []string {
	var nodes []string
	for i := range pods {
		pod := &pods[i]
		if pod.Spec.NodeName == "" || !ownedBy(pod, ds) || podReady(pod) {
			continue
		}
		nodes = append(nodes, pod.Spec.NodeName)
	}
	return fewestNames(nodes)
}

// fewestNames sorts names, drops repeats and keeps the first maxStuckNodes.
func fewestNames(names []string) []string {
	slices.Sort(names)
	names = slices.Compact(names)
	return names[:min(len(names), maxStuckNodes)]
}

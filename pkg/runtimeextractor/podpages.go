package runtimeextractor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
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

// podFacts is all the diagnosis needs of a pod.
type podFacts struct {
	nodeName string // spec.nodeName
	owned    bool   // an owner reference has the DaemonSet's UID
	ready    bool   // its first Ready condition is True
}

// notReadyNodesOf reads ds's pods page by page, in protobuf where the client
// speaks it, and returns up to maxStuckNodes nodes (sorted) whose pod is not
// ready or not of the current generation. It keeps no more than a few names
// at a time, so its memory does not grow with the node count.
func notReadyNodesOf(ctx context.Context, client kubernetes.Interface, ds *appsv1.DaemonSet) ([]string, error) {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	opts := metav1.ListOptions{LabelSelector: selector.String(), Limit: podPageSize}
	var nodes []string
	each := func(p podFacts) {
		if p.nodeName == "" || !p.owned || p.ready {
			return
		}
		nodes = append(nodes, p.nodeName)
		if len(nodes) > 4*maxStuckNodes {
			nodes = fewestNames(nodes) // a page of unready pods keeps a few names, not 500
		}
	}
	for {
		cont, err := listPodPage(ctx, client, ds.Namespace, opts, string(ds.UID), each)
		if err != nil {
			return nil, fmt.Errorf("list pods of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		nodes = fewestNames(nodes)
		if cont == "" {
			return nodes, nil
		}
		opts.Continue = cont
	}
}

// listPodPage lists one page of pods, calls each with every pod's facts
// (owner against ownerUID) and returns the page's continue token. It asks
// for protobuf, which the API server encodes at a fraction of JSON's cost,
// and reads the body as a stream, one pod at a time, keeping three fields of
// each: decoding the page into a PodList would hold the body and every pod
// whole (several KB each, mostly managedFields and containers). A fake
// clientset has no REST client and lists as it does.
func listPodPage(ctx context.Context, client kubernetes.Interface, namespace string, opts metav1.ListOptions, ownerUID string, each func(podFacts)) (string, error) {
	rc, ok := client.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil {
		pods, err := client.CoreV1().Pods(namespace).List(ctx, opts)
		if err != nil {
			return "", err
		}
		eachPod(pods, ownerUID, each)
		return pods.Continue, nil
	}
	body, err := rc.Get().Namespace(namespace).Resource("pods").
		VersionedParams(&opts, scheme.ParameterCodec).
		SetHeader("Accept", runtime.ContentTypeProtobuf+", "+runtime.ContentTypeJSON).
		Stream(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = body.Close() }()
	return decodePodPage(bufio.NewReader(body), ownerUID, each)
}

// eachPod calls each with the facts of every pod of a decoded list.
func eachPod(pods *corev1.PodList, ownerUID string, each func(podFacts)) {
	for i := range pods.Items {
		pod := &pods.Items[i]
		owned := slices.ContainsFunc(pod.OwnerReferences, func(r metav1.OwnerReference) bool { return string(r.UID) == ownerUID })
		each(podFacts{nodeName: pod.Spec.NodeName, owned: owned, ready: podReady(pod)})
	}
}

// protobufMagic starts every body of the API server's protobuf serializer.
// Stream gives no response headers, so the body's first bytes tell protobuf
// from JSON, as the serializer itself tells them apart (RecognizesData).
var protobufMagic = []byte("k8s\x00")

// decodePodPage reads one list response: protobuf, streamed, or else JSON
// (a server that does not speak protobuf for pods), decoded whole.
func decodePodPage(r *bufio.Reader, ownerUID string, each func(podFacts)) (string, error) {
	if magic, _ := r.Peek(len(protobufMagic)); !bytes.Equal(magic, protobufMagic) {
		data, err := io.ReadAll(r)
		if err != nil {
			return "", fmt.Errorf("read pod list: %w", err)
		}
		pods := &corev1.PodList{}
		if err := runtime.DecodeInto(scheme.Codecs.UniversalDeserializer(), data, pods); err != nil {
			return "", fmt.Errorf("decode pod list: %w", err)
		}
		eachPod(pods, ownerUID, each)
		return pods.Continue, nil
	}
	if _, err := r.Discard(len(protobufMagic)); err != nil {
		return "", fmt.Errorf("read protobuf pod list: %w", err)
	}
	d := &podListDecoder{r: r, ownerUID: ownerUID, each: each}
	if err := d.unknown(); err != nil {
		return "", fmt.Errorf("decode protobuf pod list: %w", err)
	}
	return d.cont, nil
}

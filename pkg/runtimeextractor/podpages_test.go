package runtimeextractor

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// The diagnosis of a large DaemonSet reads its pods in pages of podPageSize,
// asks for protobuf, follows the continue token to the end, and names the
// first maxStuckNodes not-ready nodes of all pages, not of one.
func TestNotReadyNodesReadsPodsInProtobufPages(t *testing.T) {
	const total = 2*podPageSize + 203
	uid := types.UID("ds-uid")
	notReady := map[int]bool{1100: true, 7: true, 999: true, 500: true}
	pod := func(i int) corev1.Pod {
		ready := corev1.ConditionTrue
		if notReady[i] {
			ready = corev1.ConditionFalse
		}
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%04d", i), Namespace: resources.Namespace,
				OwnerReferences: []metav1.OwnerReference{{UID: uid}}},
			Spec:   corev1.PodSpec{NodeName: fmt.Sprintf("node-%04d", i)},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
		}
	}
	encoder := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	var (
		mu       sync.Mutex
		requests []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		requests = append(requests, fmt.Sprintf("limit=%s continue=%s accept=%s", q.Get("limit"), q.Get("continue"), r.Header.Get("Accept")))
		mu.Unlock()
		from, _ := strconv.Atoi(q.Get("continue"))
		limit, _ := strconv.Atoi(q.Get("limit"))
		list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
		for i := from; i < min(from+limit, total); i++ {
			list.Items = append(list.Items, pod(i))
		}
		if from+limit < total {
			list.Continue = strconv.Itoa(from + limit)
		}
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		if err := encoder.Encode(list, w); err != nil {
			t.Errorf("encode: %v", err)
		}
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: resources.DaemonSetName, Namespace: resources.Namespace, UID: uid},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}}

	nodes, err := notReadyNodesOf(context.Background(), client, ds)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"node-0007", "node-0500", "node-0999"}; !slices.Equal(nodes, want) {
		t.Errorf("not-ready nodes %v, want %v (the first %d of all pages)", nodes, want, maxStuckNodes)
	}
	want := []string{"limit=500 continue=", "limit=500 continue=500", "limit=500 continue=1000"}
	if len(requests) != len(want) {
		t.Fatalf("%d requests for %d pods, want %d: %v", len(requests), total, len(want), requests)
	}
	for i, r := range requests {
		if !strings.HasPrefix(r, want[i]+" ") || !strings.Contains(r, "accept="+runtime.ContentTypeProtobuf) {
			t.Errorf("request %d: %s, want %s and protobuf accepted", i+1, r, want[i])
		}
	}
}

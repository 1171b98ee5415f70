package runtimeextractor

import (
	"context"
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// The diagnosis of a large DaemonSet reads its pods in pages of podPageSize,
// follows the continue token to the end, and names the first maxStuckNodes
// not-ready nodes of all pages, not of one.
func TestNotReadyNodesReadsPodsInPages(t *testing.T) {
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
	var (
		mu       sync.Mutex
		requests []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		requests = append(requests, fmt.Sprintf("limit=%s continue=%s", q.Get("limit"), q.Get("continue")))
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
		w.Header().Set("Content-Type", runtime.ContentTypeJSON)
		if err := json.NewEncoder(w).Encode(list); err != nil {
			t.Errorf("encode: %v", err)
		}
	}))
	client, ds := clientOf(t, srv), podOwner(uid)

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
	if !slices.Equal(requests, want) {
		t.Errorf("requests %v, want %v", requests, want)
	}
}

// richPod is a pod as the API server stores one: labels, annotations,
// containers, managedFields, owner references of which ds's is not first,
// and conditions in the order given.
func richPod(i int, owner types.UID, conds ...corev1.PodCondition) corev1.Pod {
	return corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("pod-%04d", i), Namespace: resources.Namespace, UID: types.UID(fmt.Sprintf("pod-uid-%d", i)),
			Labels:      map[string]string{"app": "x", "pod-template-generation": "3"},
			Annotations: map[string]string{"note": strings.Repeat("a", 300), "ds-uid-lookalike": string(owner)},
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "Node", Name: "other", UID: "other-uid"},
				{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: owner},
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:nodeName":{}}}`)}}},
		},
		Spec: corev1.PodSpec{
			NodeName:   fmt.Sprintf("node-%04d", i),
			Containers: []corev1.Container{{Name: "c", Image: "quay.io/x:latest", Args: []string{"--a", "--b"}, Env: []corev1.EnvVar{{Name: "NODE", Value: "n"}}}},
			Volumes:    []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "10.0.0.1", Conditions: conds,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true, Image: "quay.io/x:latest"}}},
	}
}

// richPods are pods of every case: ready or not, Ready first, last, absent or
// repeated, owned or not, with and without a node.
func richPods(uid types.UID) *corev1.PodList {
	cond := func(t corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: s, Reason: "R", Message: "m", LastTransitionTime: metav1.Now()}
	}
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next-page-token"}}
	for i := range 12 {
		var conds []corev1.PodCondition
		switch i % 6 {
		case 0:
			conds = []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionTrue), cond(corev1.PodScheduled, corev1.ConditionTrue)}
		case 1:
			conds = []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionTrue), cond(corev1.ContainersReady, corev1.ConditionTrue), cond(corev1.PodReady, corev1.ConditionFalse)}
		case 2:
			conds = []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionTrue)} // no Ready condition: not ready
		case 3:
			conds = []corev1.PodCondition{cond(corev1.PodInitialized, corev1.ConditionTrue), cond(corev1.PodReady, corev1.ConditionTrue)}
		case 4:
			conds = []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionUnknown), cond(corev1.PodReady, corev1.ConditionTrue)} // the first counts
		}
		owner := uid
		if i == 7 {
			owner = "someone-else"
		}
		p := richPod(i, owner, conds...)
		if i == 9 {
			p.Spec.NodeName = ""
		}
		list.Items = append(list.Items, p)
	}
	return list
}

// Only pods the DaemonSet owns, on a node, whose first Ready condition is
// not True are named, from a server's page and from a fake clientset.
func TestNotReadyNodesAreTheDaemonSetsUnreadyPods(t *testing.T) {
	uid := types.UID("ds-uid")
	list := richPods(uid)
	list.Continue = ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", runtime.ContentTypeJSON)
		if err := json.NewEncoder(w).Encode(list); err != nil {
			t.Errorf("encode: %v", err)
		}
	}))
	client, ds := clientOf(t, srv), podOwner(uid)
	want := []string{"node-0001", "node-0002", "node-0004"} // 7: another owner's; 9: no node
	for name, c := range map[string]kubernetes.Interface{"JSON": client, "fake": fake.NewClientset(podObjects(list)...)} {
		nodes, err := notReadyNodesOf(context.Background(), c, ds)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(nodes, want) {
			t.Errorf("%s: not-ready nodes %v, want %v", name, nodes, want)
		}
	}
}

func podObjects(list *corev1.PodList) []runtime.Object {
	var objs []runtime.Object
	for i := range list.Items {
		objs = append(objs, &list.Items[i])
	}
	return objs
}

// clientOf is a clientset of srv's, which closes when the test ends.
func clientOf(t *testing.T, srv *httptest.Server) kubernetes.Interface {
	t.Helper()
	t.Cleanup(srv.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// podOwner is the DaemonSet whose pods the diagnosis reads.
func podOwner(uid types.UID) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: resources.DaemonSetName, Namespace: resources.Namespace, UID: uid},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}}
}

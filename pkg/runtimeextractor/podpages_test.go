package runtimeextractor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
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
	for i, r := range requests {
		if !strings.HasPrefix(r, want[i]+" ") || !strings.Contains(r, "accept="+runtime.ContentTypeProtobuf) {
			t.Errorf("request %d: %s, want %s and protobuf accepted", i+1, r, want[i])
		}
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

// collect runs the decoder over body and returns what it saw.
func collect(body []byte, uid types.UID) ([]podFacts, string, error) {
	var got []podFacts
	cont, err := decodePodPage(bufio.NewReader(bytes.NewReader(body)), string(uid), func(p podFacts) { got = append(got, p) })
	return got, cont, err
}

// expected is what the decoded list's pods say, read as a JSON page is.
func expected(list *corev1.PodList, uid types.UID) []podFacts {
	var want []podFacts
	eachPod(list, string(uid), func(p podFacts) { want = append(want, p) })
	return want
}

// The streaming decoder reads from bodies of the real protobuf serializer,
// buffered and streaming, the same facts as a decoded PodList gives.
func TestPodPageDecoderReadsSerializedPods(t *testing.T) {
	uid := types.UID("ds-uid")
	list := richPods(uid)
	want := expected(list, uid)
	if n := len(slices.DeleteFunc(slices.Clone(want), func(p podFacts) bool { return p.ready })); n < 4 || n == len(want) {
		t.Fatalf("the fixture has %d not-ready pods of %d: want both kinds", n, len(want))
	}
	for _, streaming := range []bool{false, true} {
		var body bytes.Buffer
		enc := protobuf.NewSerializerWithOptions(scheme.Scheme, scheme.Scheme, protobuf.SerializerOptions{StreamingCollectionsEncoding: streaming})
		if err := enc.Encode(list, &body); err != nil {
			t.Fatal(err)
		}
		got, cont, err := collect(body.Bytes(), uid)
		if err != nil {
			t.Fatalf("streaming encoder %v: %v", streaming, err)
		}
		if !slices.Equal(got, want) || cont != "next-page-token" {
			t.Errorf("streaming encoder %v: got %+v continue %q, want %+v continue next-page-token", streaming, got, cont, want)
		}
	}
}

// envelope builds a protobuf body by hand around items (already marshalled
// pods), with unknown fields at every level the decoder walks.
func envelope(t *testing.T, cont string, items ...[]byte) []byte {
	t.Helper()
	unknown := func(b []byte) []byte {
		b = protowire.AppendTag(b, 900, protowire.VarintType)
		b = protowire.AppendVarint(b, 1<<40)
		b = protowire.AppendTag(b, 901, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, 7)
		b = protowire.AppendTag(b, 902, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, 7)
		b = protowire.AppendTag(b, 903, protowire.BytesType)
		return protowire.AppendBytes(b, []byte("unknown"))
	}
	meta, err := (&metav1.ListMeta{Continue: cont}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var podList []byte
	podList = unknown(podList)
	podList = protowire.AppendTag(podList, 1, protowire.BytesType)
	podList = protowire.AppendBytes(podList, meta)
	for _, item := range items {
		podList = protowire.AppendTag(podList, 2, protowire.BytesType)
		podList = protowire.AppendBytes(podList, item)
	}
	typeMeta, err := (&runtime.TypeMeta{APIVersion: "v1", Kind: "PodList"}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	b := append([]byte(nil), protobufMagic...)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, typeMeta)
	b = unknown(b)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, podList)
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendBytes(b, nil)
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	return protowire.AppendBytes(b, []byte(runtime.ContentTypeProtobuf))
}

// marshalItems marshals list's pods, each followed by unknown fields (at
// the end of the pod, and inside its metadata, spec and status).
func marshalItems(t *testing.T, list *corev1.PodList) [][]byte {
	t.Helper()
	var items [][]byte
	for i := range list.Items {
		b, err := list.Items[i].Marshal()
		if err != nil {
			t.Fatal(err)
		}
		for _, num := range []protowire.Number{1, 2, 3} {
			// A message field that comes twice merges: the second copy
			// adds only an unknown field to metadata, spec or status.
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendBytes(b, protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 5))
		}
		b = protowire.AppendTag(b, 77, protowire.BytesType)
		items = append(items, protowire.AppendBytes(b, []byte("unknown field of the pod")))
	}
	return items
}

// Unknown fields, at any level, are skipped.
func TestPodPageDecoderSkipsUnknownFields(t *testing.T) {
	uid := types.UID("ds-uid")
	list := richPods(uid)
	got, cont, err := collect(envelope(t, "c", marshalItems(t, list)...), uid)
	if err != nil {
		t.Fatal(err)
	}
	if want := expected(list, uid); !slices.Equal(got, want) || cont != "c" {
		t.Errorf("got %+v continue %q, want %+v continue c", got, cont, want)
	}
}

// A page, and each of its pods, larger than the reader's buffer is read
// through it, and the decoder's memory is that of the largest pod, not of
// the page.
func TestPodPageDecoderReadsPagesLargerThanItsBuffer(t *testing.T) {
	uid := types.UID("ds-uid")
	list := richPods(uid)
	largest := 0
	for i := range list.Items {
		list.Items[i].Annotations["big"] = strings.Repeat("x", 5000+100*i)
		largest = max(largest, list.Items[i].Size())
	}
	body := envelope(t, "", marshalItems(t, list)...)
	if len(body) < 10*largest {
		t.Fatalf("body of %d bytes, largest pod %d: want a page of many pods", len(body), largest)
	}
	r := bufio.NewReaderSize(bytes.NewReader(body), 16) // the smallest bufio allows
	var got []podFacts
	d := &podListDecoder{r: r, ownerUID: string(uid), each: func(p podFacts) { got = append(got, p) }}
	if _, err := r.Discard(len(protobufMagic)); err != nil {
		t.Fatal(err)
	}
	if err := d.unknown(); err != nil {
		t.Fatal(err)
	}
	if want := expected(list, uid); !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if cap(d.buf) > largest+100 {
		t.Errorf("decoder buffer of %d bytes for pods of at most %d (body %d): want one pod's worth", cap(d.buf), largest, len(body))
	}
}

// A malformed body gives an error that says what it is, never a panic:
// bodies cut anywhere inside the list, corrupt lengths and tags, the wrong
// kind, and random corruption.
func TestPodPageDecoderRejectsMalformedBodies(t *testing.T) {
	uid := types.UID("ds-uid")
	list := richPods(uid)
	items := marshalItems(t, list)
	good := envelope(t, "c", items...)
	// After raw come contentEncoding (empty) and contentType: a cut there is
	// at a field's boundary, and may well pass.
	rawEnd := bytes.LastIndex(good[:len(good)-len(runtime.ContentTypeProtobuf)], []byte{3<<3 | 2, 0})
	if rawEnd < 0 {
		t.Fatal("no contentEncoding field in the body")
	}
	for cut := len(protobufMagic); cut < rawEnd; cut++ {
		_, _, err := collect(good[:cut], uid)
		if err == nil || !strings.Contains(err.Error(), "decode protobuf pod list") {
			t.Fatalf("body cut at %d of %d: error %v, want a decode error", cut, len(good), err)
		}
	}

	magic := func(b []byte) []byte { return append(append([]byte(nil), protobufMagic...), b...) }
	field := func(num protowire.Number, typ protowire.Type, v ...byte) []byte {
		return append(protowire.AppendTag(nil, num, typ), v...)
	}
	raw := func(podList []byte) []byte {
		return magic(protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), podList))
	}
	for name, c := range map[string]struct {
		body []byte
		want string
	}{
		"magic alone":          {magic(nil), "no object in the body"},
		"field number 0":       {magic([]byte{0x02, 0x00}), "invalid field number"},
		"group wire type":      {magic(field(5, protowire.StartGroupType)), "wire type 3 not supported"},
		"varint overflow":      {magic(append(field(5, protowire.VarintType), bytes.Repeat([]byte{0xff}, 11)...)), "overflow"},
		"huge item":            {raw(protowire.AppendVarint(field(2, protowire.BytesType), 1<<50)), "past the list's end"},
		"item past the list":   {raw(protowire.AppendVarint(field(2, protowire.BytesType), 3)), "past the list's end"},
		"item of garbage":      {raw(protowire.AppendBytes(field(2, protowire.BytesType), []byte{0x0a, 0x7f, 0x01})), "pod: "},
		"content encoding":     {magic(protowire.AppendBytes(field(3, protowire.BytesType), []byte("gzip"))), `content encoding "gzip"`},
		"another kind":         {magic(protowire.AppendBytes(field(1, protowire.BytesType), protowire.AppendBytes(field(2, protowire.BytesType), []byte("Status")))), `kind "Status"`},
		"huge skipped field":   {raw(protowire.AppendVarint(field(9, protowire.BytesType), 1<<50)), "past its message's end"},
		"huge envelope field":  {magic(protowire.AppendVarint(field(1, protowire.BytesType), 1<<50)), "above"},
		"fixed64 cut short":    {raw(append(field(9, protowire.Fixed64Type), 1, 2)), io.ErrUnexpectedEOF.Error()},
		"list metadata broken": {raw(protowire.AppendBytes(field(1, protowire.BytesType), []byte{0x1a, 0x05})), "list metadata"},
	} {
		_, _, err := collect(c.body, uid)
		if err == nil || !strings.Contains(err.Error(), "decode protobuf pod list: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", name, err, c.want)
		}
	}

	// Random corruption: errors or wrong facts, never a panic or a hang.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := slices.Clone(good)
		for range 1 + rng.IntN(4) {
			b[len(protobufMagic)+rng.IntN(len(b)-len(protobufMagic))] = byte(rng.Uint32())
		}
		_, _, _ = collect(b, uid)
	}
}

// A server that answers JSON (no protobuf for pods) is read as JSON; a
// fake clientset (no REST client) lists as it does.
func TestPodPageFallsBackToJSONAndTheFakeClient(t *testing.T) {
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

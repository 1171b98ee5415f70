package testcluster

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

const (
	watchStarted = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseStarted","requestURI":"/apis/apps/v1/namespaces/ns/daemonsets?watch=true","verb":"watch","user":{"username":"system:serviceaccount:ns:ctl"},"objectRef":{"resource":"daemonsets","namespace":"ns","apiGroup":"apps","apiVersion":"v1"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-02T03:04:05.000001Z","stageTimestamp":"2026-01-02T03:04:05.000002Z"}`
	watchDone    = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/ns/daemonsets?watch=true","verb":"watch","user":{"username":"system:serviceaccount:ns:ctl"},"objectRef":{"resource":"daemonsets","namespace":"ns","apiGroup":"apps","apiVersion":"v1"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-02T03:04:05.000001Z","stageTimestamp":"2026-01-02T03:09:05Z"}`
	statusUpdate = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a2","stage":"ResponseComplete","requestURI":"/apis/config.openshift.io/v1/clusteroperators/insights/status","verb":"update","user":{"username":"system:serviceaccount:ns:ctl"},"objectRef":{"resource":"clusteroperators","name":"insights","apiGroup":"config.openshift.io","subresource":"status"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-02T03:04:06Z","stageTimestamp":"2026-01-02T03:04:06.1Z"}`
	discovery    = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a3","stage":"ResponseComplete","requestURI":"/api","verb":"get","user":{"username":"admin"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-02T03:04:07Z","stageTimestamp":"2026-01-02T03:04:07Z"}`
)

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func TestAuditReaderReadsEachRequestOnceAsTheLogGrows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	r := NewAuditReader(path)
	if got, err := r.Next(); err != nil || len(got) != 0 {
		t.Fatalf("missing log: got %v, %v; want nothing, no error", got, err)
	}

	// A watch's first stage, and half of the next line, still being written.
	appendTo(t, path, watchStarted+"\n"+statusUpdate[:40])
	got, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	want := []AuditEvent{{
		ID: "a1", User: "system:serviceaccount:ns:ctl", Verb: "watch", Resource: "daemonsets", Namespace: "ns",
		APIGroup: "apps", RequestURI: "/apis/apps/v1/namespaces/ns/daemonsets?watch=true", Code: 200,
		Received: time.Date(2026, 1, 2, 3, 4, 5, 1000, time.UTC),
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("first read:\n got %+v\nwant %+v", got, want)
	}

	// The rest of the line, the watch's completion (same request) and a
	// non-resource request.
	appendTo(t, path, statusUpdate[40:]+"\n"+watchDone+"\n"+discovery+"\n")
	got, err = r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "a2" || got[1].ID != "a3" {
		t.Fatalf("second read: got %+v, want requests a2 and a3 only", got)
	}
	if s := got[0]; s.Verb != "update" || s.Resource != "clusteroperators" || s.Subresource != "status" || s.Name != "insights" || !s.IsWrite() {
		t.Errorf("status update parsed as %+v", s)
	}
	if d := got[1]; d.Resource != "" || d.RequestURI != "/api" || d.IsWrite() {
		t.Errorf("discovery request parsed as %+v", d)
	}
	if got, _ := r.Next(); len(got) != 0 {
		t.Fatalf("third read of an unchanged log: %+v", got)
	}

	all, err := ReadAuditLog(path)
	if err != nil {
		t.Fatal(err)
	}
	counts := CountByUserAndVerb(all)
	wantCounts := map[string]map[string]int{
		"system:serviceaccount:ns:ctl": {"watch": 1, "update": 1},
		"admin":                        {"get": 1},
	}
	if !reflect.DeepEqual(counts, wantCounts) {
		t.Fatalf("CountByUserAndVerb = %v, want %v", counts, wantCounts)
	}
}

func TestAuditReaderAtEndSkipsTheHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	if r, err := NewAuditReaderAtEnd(path); err != nil {
		t.Fatal(err)
	} else if got, err := r.Next(); err != nil || len(got) != 0 {
		t.Fatalf("missing log: got %v, %v; want nothing, no error", got, err)
	}

	// History: one complete line, and the start of a line still being written.
	appendTo(t, path, watchStarted+"\n"+statusUpdate[:40])
	r, err := NewAuditReaderAtEnd(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Next(); err != nil || len(got) != 0 {
		t.Fatalf("unchanged log: got %+v, %v; want nothing", got, err)
	}
	// The rest of the half-written line is history too; the discovery request is new.
	appendTo(t, path, statusUpdate[40:60])
	if got, err := r.Next(); err != nil || len(got) != 0 {
		t.Fatalf("still inside the old line: got %+v, %v; want nothing", got, err)
	}
	appendTo(t, path, statusUpdate[60:]+"\n"+discovery+"\n")
	got, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "a3" {
		t.Fatalf("got %+v, want only request a3", got)
	}

	// A log that ends with a complete line starts at the next one.
	path2 := filepath.Join(t.TempDir(), "audit.log")
	appendTo(t, path2, watchStarted+"\n")
	r2, err := NewAuditReaderAtEnd(path2)
	if err != nil {
		t.Fatal(err)
	}
	appendTo(t, path2, statusUpdate+"\n")
	if got, err := r2.Next(); err != nil || len(got) != 1 || got[0].ID != "a2" {
		t.Fatalf("got %+v, %v; want only request a2", got, err)
	}
}

func TestAuditReaderRejectsGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	appendTo(t, path, "not json\n")
	if _, err := NewAuditReader(path).Next(); err == nil {
		t.Fatal("a line that is not JSON was accepted")
	}
}

func TestServiceAccountUser(t *testing.T) {
	if got := ServiceAccountUser("openshift-insights", "runtime-extractor-controller"); got != "system:serviceaccount:openshift-insights:runtime-extractor-controller" {
		t.Fatalf("ServiceAccountUser = %q", got)
	}
}

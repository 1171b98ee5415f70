package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// requestLog reads kube-apiserver's audit log from the moment it was created,
// to count the requests of one user.
type requestLog struct {
	e      *env
	reader *testcluster.AuditReader
	read   []testcluster.AuditEvent // every request read so far
}

var auditMarkers atomic.Int64

func (e *env) requestLog() *requestLog {
	e.t.Helper()
	r, err := testcluster.NewAuditReaderAtEnd(e.cluster.AuditLogPath())
	if err != nil {
		e.t.Fatal(err)
	}
	return &requestLog{e: e, reader: r}
}

// flush reads the log up to a marker request made now, so that every request
// the API server received before flush was called has been read.
func (l *requestLog) flush() {
	l.e.t.Helper()
	marker := fmt.Sprintf("e2e-audit-marker-%d", auditMarkers.Add(1))
	_, err := l.e.kube.CoreV1().ConfigMaps("default").Get(context.Background(), marker, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		l.e.t.Fatalf("audit marker request: %v", err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		events, err := l.reader.Next()
		if err != nil {
			return false, err
		}
		l.read = append(l.read, events...)
		for _, ev := range events {
			if ev.Resource == "configmaps" && ev.Name == marker {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		l.e.t.Fatalf("read the audit log up to the marker: %v", err)
	}
}

// notCounted are requests a controller makes whatever it does: leader
// election, and the authentication and authorization of the test's /metrics
// scrapes.
var notCounted = map[string]bool{"leases": true, "tokenreviews": true, "subjectaccessreviews": true}

// writes returns user's writes received in [from, to), leader election and
// /metrics authorization left out, as "verb resource[/subresource]/name".
func (l *requestLog) writes(user string, from, to time.Time) []string {
	var out []string
	for _, ev := range l.read {
		if ev.User != user || !ev.IsWrite() || notCounted[ev.Resource] || ev.Received.Before(from) || !ev.Received.Before(to) {
			continue
		}
		res := ev.Resource
		if ev.Subresource != "" {
			res += "/" + ev.Subresource
		}
		out = append(out, fmt.Sprintf("%s %s/%s (%d)", ev.Verb, res, ev.Name, ev.Code))
	}
	sort.Strings(out)
	return out
}

// reads counts user's reads (get, list, watch) of resource in [from, to).
func (l *requestLog) reads(user, resource string, from, to time.Time) int {
	n := 0
	for _, ev := range l.read {
		if ev.User == user && !ev.IsWrite() && ev.Resource == resource && !ev.Received.Before(from) && ev.Received.Before(to) {
			n++
		}
	}
	return n
}

func joinOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

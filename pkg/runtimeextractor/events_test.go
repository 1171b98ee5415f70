package runtimeextractor

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// Issue 18: an error that quotes a 700 KB config value does not go into an
// Event whole; the Event carries its beginning and how much was cut.
func TestEventMessagesAreCapped(t *testing.T) {
	log := &eventLog{}
	e := changeEvents{recorder: log}
	huge := errors.New(`spec.template.spec.priorityClassName: Invalid value: "` + strings.Repeat("ü", 350<<10) + `"`)
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-insights", Name: "insights-runtime-extractor"}}
	e.failed(ds, ReasonApplyFailed, huge.Error()+"; retrying with backoff")
	e.applied(ds, false, huge.Error())

	got := log.with("")
	if len(got) != 2 {
		t.Fatalf("got %d Events, want 2", len(got))
	}
	for _, ev := range got {
		if len(ev.text) > status.MaxMessageBytes || !utf8.ValidString(ev.text) || !strings.HasSuffix(ev.text, " bytes cut]") {
			t.Errorf("%s Event of %d bytes (valid UTF-8 %v, ends %q), want at most %d with a cut marker",
				ev.reason, len(ev.text), utf8.ValidString(ev.text), ev.text[max(len(ev.text)-30, 0):], status.MaxMessageBytes)
		}
	}
	if !strings.HasPrefix(got[0].text, "spec.template.spec.priorityClassName: Invalid value") {
		t.Errorf("Warning %.60q..., want the error's beginning", got[0].text)
	}
}

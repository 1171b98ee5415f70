package runtimeextractor

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
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

// A repair's Event names who made the change, as managedFields says, says
// "deleted by someone else" for a deletion, and stays within the cap however
// many and however long the writers' names are.
func TestRepairEventNamesTheWriter(t *testing.T) {
	drifted := fsm.Transition{From: fsm.StateRunning, To: fsm.StateDrifted, Event: fsm.Modified{Generation: 4}, Action: fsm.ActionApply}
	patch := core.Edit{Manager: "kubectl-patch", Operation: "Update", Time: t0.Add(time.Second)}
	cases := []struct {
		name    string
		cause   core.Cause
		created bool
		want    string
	}{
		{"one writer", core.Cause{Transition: drifted, Repair: true, Drift: core.Repair{Kinds: []DriftKind{DriftModified}, Edits: []core.Edit{patch}}}, false,
			"repaired a change made by someone else (spec changed), changed by kubectl-patch (Update at 2026-12-02T12:00:01Z)"},
		{"a tie", core.Cause{Transition: drifted, Repair: true, Drift: core.Repair{Kinds: []DriftKind{DriftModified}, Edits: []core.Edit{patch, {Manager: "helm", Operation: "Apply", Time: patch.Time}}}}, false,
			"changed by kubectl-patch (Update at 2026-12-02T12:00:01Z), helm (Apply at 2026-12-02T12:00:01Z)"},
		{"no entry names one", core.Cause{Transition: drifted, Repair: true, Drift: core.Repair{Kinds: []DriftKind{DriftMetadata}, Unnamed: true}}, false,
			"repaired a change made by someone else (owned label or annotation changed), by a writer managedFields does not name"},
		{"a deletion", core.Cause{Transition: drifted, Repair: true, Drift: core.Repair{Kinds: []DriftKind{DriftDeleted}}}, true,
			"recreated after it was deleted by someone else"},
	}
	for _, tc := range cases {
		if got := tc.cause.Why(tc.created); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want it to say %q", tc.name, got, tc.want)
		}
	}

	many := core.Cause{Transition: drifted, Repair: true, Drift: core.Repair{Kinds: []DriftKind{DriftModified, DriftMetadata}}}
	for i := range 50 {
		many.Drift.Edits = append(many.Drift.Edits, core.Edit{Manager: strings.Repeat(string(rune('a'+i%26)), resources.MaxNameBytes), Operation: "Update", Time: t0})
	}
	log := &eventLog{}
	e := changeEvents{recorder: log}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-insights", Name: "insights-runtime-extractor"}}
	e.applied(ds, false, many.Why(false))
	got := log.with(ReasonUpdated)
	if len(got) != 1 || len(got[0].text) > 1024 || !strings.Contains(got[0].text, "and 47 more") {
		t.Fatalf("Event of %d bytes %q: want at most 1 KiB, naming three writers and how many more", len(got[0].text), got[0].text)
	}
}

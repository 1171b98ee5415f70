package e2e

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// TestRepairEventNamesTheWriter changes the extractor image with field
// manager kubectl-patch and wants the repair's Event on the DaemonSet to name
// the image it restored and kubectl-patch, as the API server recorded it in
// managedFields.
func TestRepairEventNamesTheWriter(t *testing.T) {
	e := newEnv(t)
	c, ds := e.deployed(controllerOpts{})
	want := testcluster.ExtractorImage(ds)
	ds = ds.DeepCopy()
	for i := range ds.Spec.Template.Spec.Containers {
		if ds.Spec.Template.Spec.Containers[i].Name == "extractor" {
			ds.Spec.Template.Spec.Containers[i].Image = "quay.io/someone/else:latest"
		}
	}
	if _, err := e.kube.AppsV1().DaemonSets(ns).Update(context.Background(), ds, metav1.UpdateOptions{FieldManager: "kubectl-patch"}); err != nil {
		t.Fatal(err)
	}
	e.waitDaemonSet("the image restored", func(cur *appsv1.DaemonSet) bool {
		return cur != nil && testcluster.ExtractorImage(cur) == want && cur.Generation > ds.Generation
	})
	var text string
	e.eventually("an Updated Event naming kubectl-patch", func(context.Context) (bool, error) {
		for _, ev := range e.events(runtimeextractor.ReasonUpdated) {
			if ev.InvolvedObject.Kind == "DaemonSet" && ev.InvolvedObject.UID == ds.UID && strings.Contains(ev.Message, "(spec changed: restored container extractor image), changed by kubectl-patch (Update at ") {
				text = ev.Message
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("Event: %s", text)
	if !strings.Contains(c.metrics(), `runtime_extractor_repairs_total{manager="kubectl-patch"} 1`) {
		t.Errorf("/metrics does not count the repair for kubectl-patch")
	}
	if !c.logContains("changed by kubectl-patch (Update at ") || c.logContains("recorder_logging.go") {
		t.Errorf("the log does not name kubectl-patch, or still carries library-go's Events")
	}
}

package testcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestHoldPodsOnNarrowsOnlyThePodReadyStage runs on the shipped stages file:
// the pod-ready stage gains one expression, the others pass through whole.
func TestHoldPodsOnNarrowsOnlyThePodReadyStage(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	stages, err := os.ReadFile(filepath.Join(root, "bin", kwokStagesFile))
	if err != nil {
		t.Skipf("no kwok stages (make tools writes them): %v", err)
	}
	held, err := holdPodsOn(stages, []string{"kwok-node-2"})
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(held), "\n---\n")
	if want := strings.Count(string(stages), "kind: Stage"); strings.Count(string(held), "kind: Stage") != want {
		t.Fatalf("got %d stages, want %d:\n%s", len(docs), want, held)
	}
	found := false
	for _, doc := range docs {
		var st struct {
			Metadata struct{ Name string }
			Spec     struct {
				Selector struct {
					MatchExpressions []struct {
						Key, Operator string
						Values        []string
					}
				}
				Next map[string]any
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &st); err != nil {
			t.Fatalf("parse %q: %v", doc, err)
		}
		if st.Spec.Next == nil {
			t.Errorf("stage %s lost its next", st.Metadata.Name)
		}
		var last struct {
			Key, Operator string
			Values        []string
		}
		if n := len(st.Spec.Selector.MatchExpressions); n > 0 {
			last = st.Spec.Selector.MatchExpressions[n-1]
		}
		isHold := last.Key == ".spec.nodeName" && last.Operator == "NotIn" && strings.Join(last.Values, ",") == "kwok-node-2"
		if st.Metadata.Name == podReadyStage {
			found = true
			if !isHold {
				t.Errorf("pod-ready stage not narrowed: %+v", st.Spec.Selector)
			}
		} else if isHold {
			t.Errorf("stage %s narrowed too", st.Metadata.Name)
		}
	}
	if !found {
		t.Fatal("no pod-ready stage in the output")
	}
}

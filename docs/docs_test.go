// Package docs_test keeps the written documentation in step with the code: the
// examples parse, every metric, Event reason and condition reason is documented,
// and the embedding guide shows the compiled example's code.
package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/config"
	"github.com/insights-runtime-extractor/controller/pkg/metrics"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// codeBlocks returns the fenced code blocks of markdown with the given language.
func codeBlocks(markdown, lang string) []string {
	var blocks []string
	var cur []string
	in := false
	for _, line := range strings.Split(markdown, "\n") {
		switch {
		case !in && line == "```"+lang:
			in, cur = true, nil
		case in && line == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

func TestSchedulingExampleIsTheTestedConfig(t *testing.T) {
	var example string
	for _, b := range codeBlocks(read(t, "operations.md"), "yaml") {
		if strings.Contains(b, "kind: ConfigMap") && strings.Contains(b, "runtimeExtractor:") {
			example = b
		}
	}
	if example == "" {
		t.Fatal("operations.md has no ConfigMap example with runtimeExtractor settings")
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict([]byte(example), cm); err != nil {
		t.Fatalf("the example ConfigMap does not decode: %v", err)
	}
	got, err := config.FromConfigMap(cm)
	if err != nil {
		t.Fatalf("the example config is invalid: %v", err)
	}
	want, err := config.Parse([]byte(read(t, "../testdata/config/full.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("operations.md's example differs from testdata/config/full.yaml:\n got %+v\nwant %+v", got, want)
	}
}

func TestEveryMetricIsDocumented(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New()
	m.MustRegister(reg)
	// A vector without observations has no series to gather: give each one.
	m.ObserveTransition(fsm.Transition{From: fsm.StateDisabled, To: fsm.StateDeploying, Event: fsm.Enabled{}, Action: fsm.ActionApply})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	doc := read(t, "metrics.md")
	var registered []string
	for _, f := range families {
		registered = append(registered, f.GetName())
		if !strings.Contains(doc, "`"+f.GetName()+"`") {
			t.Errorf("metrics.md does not describe %s", f.GetName())
		}
	}
	// Every metric named in the docs exists (histogram series add suffixes).
	for _, page := range []string{"metrics.md", "operations.md", "../README.md"} {
		for _, name := range regexp.MustCompile(`runtime_extractor_[a-z_]+`).FindAllString(read(t, page), -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
			if !slices.Contains(registered, base) {
				t.Errorf("%s names %s, which is not a metric", page, name)
			}
		}
	}
}

func TestEveryReasonIsDocumented(t *testing.T) {
	doc := read(t, "operations.md")
	for _, reason := range []string{
		runtimeextractor.ReasonStateChanged, runtimeextractor.ReasonDriftDetected,
		runtimeextractor.ReasonApplyFailed, runtimeextractor.ReasonDeleteFailed,
		resources.EventReasonCreated, resources.EventReasonUpdated, resources.EventReasonDeleted,
		config.ReasonInvalidConfig,
		status.ReasonAsExpected, status.ReasonDisabled, status.ReasonRollingOut, status.ReasonUpgrading,
		status.ReasonRestoring, status.ReasonDeleting, status.ReasonApplyFailed, status.ReasonDeleteFailed,
		status.ReasonInvalidConfig,
	} {
		if !strings.Contains(doc, "`"+reason+"`") {
			t.Errorf("operations.md does not document the reason %s", reason)
		}
	}
	for _, c := range status.ConditionTypes {
		if !strings.Contains(doc, "`"+string(c)+"`") {
			t.Errorf("operations.md does not document the condition %s", c)
		}
	}
}

// TestEmbeddingUsageMatchesTheExample compares the Usage block of embedding.md with
// the same lines of the compiled Example.
func TestEmbeddingUsageMatchesTheExample(t *testing.T) {
	const first, last = "// Create informer factory for watching resources", "go controller.Run(ctx)"
	var doc string
	for _, b := range codeBlocks(read(t, "embedding.md"), "go") {
		if strings.HasPrefix(b, first) {
			doc = b
		}
	}
	if doc == "" {
		t.Fatal("embedding.md has no Usage block starting with " + first)
	}
	src := read(t, "../pkg/runtimeextractor/example_test.go")
	start, end := strings.Index(src, first), strings.Index(src, last)
	if start < 0 || end < start {
		t.Fatal("example_test.go no longer has the Usage lines")
	}
	var example []string
	for _, line := range strings.Split(src[start:end+len(last)], "\n") {
		line = strings.TrimPrefix(line, "\t")
		example = append(example, strings.ReplaceAll(line, "\t", "    "))
	}
	// The example checks the informer's error; the doc leaves that to the reader.
	normalize := func(s string) []string {
		var out []string
		skip := 0
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			switch {
			case skip > 0:
				skip--
				continue
			case strings.TrimSpace(l) == "if err != nil {":
				skip = 2
				continue
			}
			out = append(out, strings.TrimRight(l, " "))
		}
		return out
	}
	if got, want := normalize(doc), normalize(strings.Join(example, "\n")); !slices.Equal(got, want) {
		t.Errorf("embedding.md's Usage differs from example_test.go:\n got:\n%s\nwant:\n%s",
			strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestNoMachinePaths: the docs must not name paths of the machine they were
// written on.
func TestNoMachinePaths(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join("..", "README.md"))
	for _, page := range pages {
		for _, bad := range []string{"/work/", "/root/", "/home/", "/tmp/"} {
			if strings.Contains(read(t, filepath.ToSlash(page)), bad) {
				t.Errorf("%s names a local path (%s)", page, bad)
			}
		}
	}
}

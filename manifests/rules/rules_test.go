package rules

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"go.yaml.in/yaml/v3"
)

const (
	// ruleManifest is the PrometheusRule, one directory up from this module.
	ruleManifest = "../09-prometheusrule.yaml"
	// testFile holds the unit tests, in promtool's format.
	testFile = "testdata/alerts_test.yaml"
)

// promqlParser parses as Prometheus does without feature flags.
var promqlParser = parser.NewParser(parser.Options{})

// ruleGroups reads the PrometheusRule's spec.groups and parses them with
// rulefmt, strictly (unknown fields are errors), as Prometheus parses a rule
// file: expressions, durations, label names and annotation templates.
func ruleGroups(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	spec := manifestSpec(t)
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, promqlParser, promslog.NewNopLogger())
	for _, err := range errs {
		t.Errorf("%s: %v", ruleManifest, err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	if len(groups.Groups) == 0 {
		t.Fatalf("%s has no rule group", ruleManifest)
	}
	return groups
}

// manifestSpec returns the spec of the one PrometheusRule in ruleManifest as
// YAML: the layout of a rule file (groups).
func manifestSpec(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(ruleManifest)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		APIVersion string    `yaml:"apiVersion"`
		Kind       string    `yaml:"kind"`
		Metadata   yaml.Node `yaml:"metadata"`
		Spec       yaml.Node `yaml:"spec"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s: %v", ruleManifest, err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		t.Fatalf("%s: more than one document", ruleManifest)
	}
	if doc.APIVersion != "monitoring.coreos.com/v1" || doc.Kind != "PrometheusRule" {
		t.Fatalf("%s: %s %s, want monitoring.coreos.com/v1 PrometheusRule", ruleManifest, doc.APIVersion, doc.Kind)
	}
	spec, err := yaml.Marshal(&doc.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// alertingRules returns every alerting rule of groups.
func alertingRules(groups *rulefmt.RuleGroups) []rulefmt.Rule {
	var out []rulefmt.Rule
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// The unit test file, in the format of `promtool test rules` (the subset
// used here; any other field is refused). The rules come from the manifest
// rather than rule_files.
type unitTestFile struct {
	EvaluationInterval model.Duration `yaml:"evaluation_interval"`
	Tests              []testGroup    `yaml:"tests"`
}

type testGroup struct {
	Name           string          `yaml:"name"`
	Interval       model.Duration  `yaml:"interval"`
	InputSeries    []series        `yaml:"input_series"`
	AlertRuleTests []alertTestCase `yaml:"alert_rule_test"`
}

type series struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type alertTestCase struct {
	EvalTime  model.Duration `yaml:"eval_time"`
	Alertname string         `yaml:"alertname"`
	ExpAlerts []expAlert     `yaml:"exp_alerts"`
}

type expAlert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

func readTests(t *testing.T) unitTestFile {
	t.Helper()
	data, err := os.ReadFile(testFile)
	if err != nil {
		t.Fatal(err)
	}
	var f unitTestFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", testFile, err)
	}
	if f.EvaluationInterval == 0 {
		f.EvaluationInterval = model.Duration(time.Minute) // promtool's default
	}
	if len(f.Tests) == 0 {
		t.Fatalf("%s has no tests", testFile)
	}
	return f
}

// loadString is the input series as a promqltest load command, one sample
// every interval from time 0.
func (tg testGroup) loadString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "load %s\n", time.Duration(tg.Interval))
	for _, s := range tg.InputSeries {
		fmt.Fprintf(&b, "  %s %s\n", s.Series, s.Values)
	}
	return b.String()
}

// groupLoader hands the manifest's groups to the rules manager, as the
// rule file loader hands a file's.
type groupLoader struct{ groups *rulefmt.RuleGroups }

func (l groupLoader) Load(string, bool, model.ValidationScheme) (*rulefmt.RuleGroups, []error) {
	return l.groups, nil
}

func (groupLoader) Parse(query string) (parser.Expr, error) { return promqlParser.ParseExpr(query) }

// firing is one firing alert: its labels and annotations.
type firing struct{ labels, annotations labels.Labels }

func (f firing) String() string { return f.labels.String() + "\n      " + f.annotations.String() }

// list shows firing alerts one to a line, or "none".
func list(fs []firing) string {
	if len(fs) == 0 {
		return "none"
	}
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("\n    " + f.String())
	}
	return b.String()
}

func sortFirings(fs []firing) {
	sort.Slice(fs, func(i, j int) bool {
		if c := labels.Compare(fs[i].labels, fs[j].labels); c != 0 {
			return c < 0
		}
		return labels.Compare(fs[i].annotations, fs[j].annotations) < 0
	})
}

// run evaluates the rules over tg's series as promtool does: from time 0 to
// the last eval_time, every evalInterval, with the samples up to each step
// loaded before it; an alert test at time T is checked against the firing
// alerts of the step at or just before T. It returns what differs.
func (tg testGroup) run(groups *rulefmt.RuleGroups, evalInterval time.Duration) []error {
	suite, err := promqltest.NewLazyLoader(tg.loadString(), promqltest.LazyLoaderOpts{
		EnableAtModifier: true, EnableNegativeOffset: true, Parser: promqlParser,
	})
	if err != nil {
		return []error{err}
	}
	defer suite.Close()
	suite.SubqueryInterval = evalInterval

	manager := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
		Parser:       promqlParser,
		GroupLoader:  groupLoader{groups},
	})
	loaded, errs := manager.LoadGroups(time.Duration(tg.Interval), labels.EmptyLabels(), "", nil, false, ruleManifest)
	if errs != nil {
		return errs
	}
	var evalGroups []*rules.Group
	for _, g := range loaded {
		evalGroups = append(evalGroups, g)
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				// As promtool does: no `for` state to restore from ALERTS_FOR_STATE.
				ar.SetRestored(true)
			}
		}
	}
	sort.Slice(evalGroups, func(i, j int) bool { return evalGroups[i].Name() < evalGroups[j].Name() })

	cases := slices.Clone(tg.AlertRuleTests)
	slices.SortStableFunc(cases, func(a, b alertTestCase) int { return cmp.Compare(a.EvalTime, b.EvalTime) })
	var maxEval time.Duration
	if len(cases) > 0 {
		maxEval = time.Duration(cases[len(cases)-1].EvalTime)
	}

	start := time.Unix(0, 0).UTC()
	var failures []error
	next := 0
	for ts := start; !ts.After(start.Add(maxEval)); ts = ts.Add(evalInterval) {
		var evalErrs []error
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				evalErrs = append(evalErrs, err)
				return
			}
			for _, g := range evalGroups {
				g.Eval(suite.Context(), ts)
				for _, r := range g.Rules() {
					if r.LastError() != nil {
						evalErrs = append(evalErrs, fmt.Errorf("rule %s at %s: %w", r.Name(), ts.Sub(start), r.LastError()))
					}
				}
			}
		})
		if len(evalErrs) > 0 {
			return append(failures, evalErrs...)
		}

		firingNow := map[string][]firing{}
		for _, g := range evalGroups {
			for _, r := range g.Rules() {
				ar, ok := r.(*rules.AlertingRule)
				if !ok {
					continue
				}
				for _, a := range ar.ActiveAlerts() {
					if a.State == rules.StateFiring {
						firingNow[ar.Name()] = append(firingNow[ar.Name()], firing{a.Labels.Copy(), a.Annotations.Copy()})
					}
				}
			}
		}
		for ; next < len(cases) && time.Duration(cases[next].EvalTime) < ts.Sub(start)+evalInterval; next++ {
			c := cases[next]
			var want []firing
			for _, a := range c.ExpAlerts {
				lbls := map[string]string{labels.AlertName: c.Alertname}
				for k, v := range a.ExpLabels {
					lbls[k] = v
				}
				want = append(want, firing{labels.FromMap(lbls), labels.FromMap(a.ExpAnnotations)})
			}
			got := firingNow[c.Alertname]
			sortFirings(want)
			sortFirings(got)
			if !slices.EqualFunc(want, got, func(a, b firing) bool {
				return labels.Equal(a.labels, b.labels) && labels.Equal(a.annotations, b.annotations)
			}) {
				failures = append(failures, fmt.Errorf("%s at %s:\n  want %s\n  got %s", c.Alertname, time.Duration(c.EvalTime), list(want), list(got)))
			}
		}
	}
	return failures
}

// TestAlerts runs the unit tests of testdata/alerts_test.yaml.
func TestAlerts(t *testing.T) {
	groups := ruleGroups(t)
	f := readTests(t)
	for i, tg := range f.Tests {
		name := tg.Name
		if name == "" {
			t.Fatalf("%s: test %d has no name", testFile, i)
		}
		if tg.Interval == 0 {
			tg.Interval = f.EvaluationInterval
		}
		t.Run(name, func(t *testing.T) {
			for _, err := range tg.run(groups, time.Duration(f.EvaluationInterval)) {
				t.Error(err)
			}
		})
	}
}

// TestEveryAlertIsTestedBothWays: each alert has a case where it fires and
// one where it must not, and every case names an alert that exists (a
// misspelt name would make "does not fire" pass for nothing).
func TestEveryAlertIsTestedBothWays(t *testing.T) {
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tg := range readTests(t).Tests {
		for _, c := range tg.AlertRuleTests {
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname] = true
			} else {
				quiet[c.Alertname] = true
			}
		}
	}
	alerts := map[string]bool{}
	for _, r := range alertingRules(ruleGroups(t)) {
		alerts[r.Alert] = true
		if !fires[r.Alert] {
			t.Errorf("no test shows %s firing", r.Alert)
		}
		if !quiet[r.Alert] {
			t.Errorf("no test shows %s not firing", r.Alert)
		}
	}
	for name := range fires {
		if !alerts[name] {
			t.Errorf("%s tests %s, which is no alert of %s", testFile, name, ruleManifest)
		}
	}
	for name := range quiet {
		if !alerts[name] {
			t.Errorf("%s tests %s, which is no alert of %s", testFile, name, ruleManifest)
		}
	}
}

// Runbooks are sections of docs/runbooks.md, one per alert.
const (
	runbooksFile    = "../../docs/runbooks.md"
	runbookURLBase  = "https://github.com/insights-runtime-extractor/controller/blob/main/docs/runbooks.md"
	runbookSections = "Symptom, Impact, Diagnosis, Mitigation"
)

// anchor is the fragment GitHub gives a markdown heading: lower case,
// spaces to hyphens, other punctuation dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// runbookSectionsOf maps each "## " section of runbooks.md, by anchor, to
// the titles of its "### " subsections.
func runbookSectionsOf(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash(runbooksFile))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	cur := ""
	inCode := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		switch {
		case inCode:
		case strings.HasPrefix(line, "## "):
			cur = anchor(line[3:])
			out[cur] = []string{}
		case strings.HasPrefix(line, "### ") && cur != "":
			out[cur] = append(out[cur], strings.TrimSpace(line[4:]))
		}
	}
	return out
}

// TestEveryAlertIsActionable: a severity OpenShift's monitoring knows, a
// summary and a description, a `for`, and a runbook_url to its own section
// of runbooks.md, which has the four parts.
func TestEveryAlertIsActionable(t *testing.T) {
	sections := runbookSectionsOf(t)
	for _, r := range alertingRules(ruleGroups(t)) {
		if s := r.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
			t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		if r.For <= 0 {
			t.Errorf("%s: no `for`: one bad sample would fire it", r.Alert)
		}
		want := runbookURLBase + "#" + anchor(r.Alert)
		if got := r.Annotations["runbook_url"]; got != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
		}
		subs, ok := sections[anchor(r.Alert)]
		if !ok {
			t.Errorf("%s has no section \"## %s\"", runbooksFile, r.Alert)
			continue
		}
		if got := strings.Join(subs, ", "); got != runbookSections {
			t.Errorf("%s: the runbook's parts are %q, want %q", r.Alert, got, runbookSections)
		}
	}
}

func TestAnchor(t *testing.T) {
	for in, want := range map[string]string{
		"RuntimeExtractorDegraded":     "runtimeextractordegraded",
		"Degraded: ApplyFailed, again": "degraded-applyfailed-again",
		"`make rules` fails":           "make-rules-fails",
	} {
		if got := anchor(in); got != want {
			t.Errorf("anchor(%q) = %q, want %q", in, got, want)
		}
	}
}

package rules

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/insights-runtime-extractor/controller/pkg/metrics"
)

// targetLabels are the labels the platform Prometheus adds to every series
// it scrapes through the ServiceMonitor (and its external labels).
var targetLabels = []string{"namespace", "pod", "service", "endpoint", "job", "instance", "container", "prometheus"}

// exported is one metric family the binary registers.
type exported struct {
	labels []string // its own labels, constant and variable
	typ    dto.MetricType
	typed  bool // typ is known: the family had series to gather
}

var (
	descName   = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)
	descConst  = regexp.MustCompile(`constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}\}$`)
	constLabel = regexp.MustCompile(`^([a-zA-Z_][a-zA-Z0-9_]*)=`)
)

// binaryMetrics returns what the binary registers: the collectors of
// metrics.New and metrics.NewBuildInfo, as the controller command registers
// them, read from their descriptors (so a vector without series counts),
// with the type of each family that has series.
func binaryMetrics(t *testing.T) map[string]exported {
	t.Helper()
	m := metrics.New()
	collectors := append(m.Collectors(), metrics.NewBuildInfo("v0.0.0-rules"))
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterAll(reg, collectors...); err != nil {
		t.Fatal(err)
	}
	out := map[string]exported{}
	for _, c := range collectors {
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			s := d.String()
			name, ls := descName.FindStringSubmatch(s), descConst.FindStringSubmatch(s)
			if name == nil || ls == nil {
				t.Fatalf("cannot read the descriptor %s", s)
			}
			var e exported
			for _, cl := range strings.Split(ls[1], ",") {
				if l := constLabel.FindStringSubmatch(cl); l != nil {
					e.labels = append(e.labels, l[1])
				}
			}
			for _, vl := range strings.Split(ls[2], ",") {
				if vl = strings.TrimSuffix(strings.TrimPrefix(vl, "c("), ")"); vl != "" {
					e.labels = append(e.labels, vl)
				}
			}
			out[name[1]] = e
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		e, ok := out[f.GetName()]
		if !ok {
			t.Fatalf("gathered %s, which no descriptor names", f.GetName())
		}
		e.typ, e.typed = f.GetType(), true
		out[f.GetName()] = e
	}
	if _, ok := out[metrics.Namespace+"_state"]; !ok || len(out) < 10 {
		t.Fatalf("read %d metrics from the registry, without %s_state", len(out), metrics.Namespace)
	}
	return out
}

// family resolves a series name to its family: itself, or a histogram's or
// summary's _bucket, _sum or _count series.
func family(reg map[string]exported, name string) (exported, bool) {
	if e, ok := reg[name]; ok {
		return e, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		e, ok := reg[base]
		if !ok || !e.typed {
			continue
		}
		switch {
		case e.typ == dto.MetricType_HISTOGRAM:
			if suffix == "_bucket" {
				e.labels = append(slices.Clone(e.labels), "le")
			}
			return e, true
		case e.typ == dto.MetricType_SUMMARY && suffix != "_bucket":
			return e, true
		}
	}
	return exported{}, false
}

// checkExpr reports every metric that expr names and the binary does not
// export, every selector without a metric name, and every label that a
// matcher or a grouping names and that neither the metric nor the scrape
// has.
func checkExpr(reg map[string]exported, expr string) []error {
	parsed, err := promqlParser.ParseExpr(expr)
	if err != nil {
		return []error{err}
	}
	expr = strings.Join(strings.Fields(expr), " ") // one line in messages
	var errs []error
	parser.Inspect(parsed, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			if n.Name == "" {
				errs = append(errs, fmt.Errorf("%s: a selector without a metric name", n))
				return nil
			}
			e, ok := family(reg, n.Name)
			if !ok {
				errs = append(errs, fmt.Errorf("%s: the binary exports no metric %s", expr, n.Name))
				return nil
			}
			for _, m := range n.LabelMatchers {
				if m.Name != model.MetricNameLabel && !slices.Contains(e.labels, m.Name) && !slices.Contains(targetLabels, m.Name) {
					errs = append(errs, fmt.Errorf("%s: %s has no label %s", expr, n.Name, m.Name))
				}
			}
		case *parser.AggregateExpr:
			if n.Without {
				return nil
			}
			parser.Inspect(n.Expr, func(inner parser.Node, _ []parser.Node) error {
				vs, ok := inner.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				e, ok := family(reg, vs.Name)
				if !ok {
					return nil // reported above
				}
				for _, l := range n.Grouping {
					if !slices.Contains(e.labels, l) && !slices.Contains(targetLabels, l) {
						errs = append(errs, fmt.Errorf("%s: grouping by %s, which %s does not have", expr, l, vs.Name))
					}
				}
				return nil
			})
		}
		return nil
	})
	return errs
}

var (
	templateAction = regexp.MustCompile(`\{\{(.*?)\}\}`)
	templateQuery  = regexp.MustCompile(`(?:^|[\s(|])query(\s+("(?:[^"\\]|\\.)*"))?`)
)

// templateQueries returns the PromQL of every `query "..."` in an
// annotation template; a query that is not a string literal is an error,
// as it could not be checked.
func templateQueries(text string) ([]string, []error) {
	var queries []string
	var errs []error
	for _, action := range templateAction.FindAllStringSubmatch(text, -1) {
		for _, q := range templateQuery.FindAllStringSubmatch(action[1], -1) {
			if q[2] == "" {
				errs = append(errs, fmt.Errorf("{{%s}}: the query is not a string literal", action[1]))
				continue
			}
			s, err := strconv.Unquote(q[2])
			if err != nil {
				errs = append(errs, err)
				continue
			}
			queries = append(queries, s)
		}
	}
	return queries, errs
}

// TestAlertsUseOnlyExportedMetrics: every metric in an alert's expression,
// or in a query of its annotations, is one the binary exports, with the
// labels used.
func TestAlertsUseOnlyExportedMetrics(t *testing.T) {
	reg := binaryMetrics(t)
	var checked int
	for _, r := range alertingRules(ruleGroups(t)) {
		exprs := []string{r.Expr}
		for name, text := range r.Annotations {
			queries, errs := templateQueries(text)
			for _, err := range errs {
				t.Errorf("%s, annotation %s: %v", r.Alert, name, err)
			}
			exprs = append(exprs, queries...)
		}
		for _, expr := range exprs {
			for _, err := range checkExpr(reg, expr) {
				t.Errorf("%s: %v", r.Alert, err)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no expression checked")
	}
}

// TestCheckRefusesWhatTheBinaryDoesNotExport keeps the check honest.
func TestCheckRefusesWhatTheBinaryDoesNotExport(t *testing.T) {
	reg := binaryMetrics(t)
	for expr, wantErr := range map[string]bool{
		`runtime_extractor_degraded{reason="ApplyFailed"} == 1`:                                    false,
		`sum by (le) (rate(runtime_extractor_action_duration_seconds_bucket{action="Apply"}[5m]))`: false,
		`max by (namespace, manager) (runtime_extractor_repairs_total{pod!=""})`:                   false,
		`runtime_extractor_build_info{version!=""}`:                                                false,
		`runtime_extractor_degraded_total > 0`:                                                     true, // no such metric
		`runtime_extractor_state_bucket`:                                                           true, // not a histogram
		`runtime_extractor_degraded{reasn="ApplyFailed"}`:                                          true, // no such label
		`max by (reasn) (runtime_extractor_degraded)`:                                              true,
		`{__name__=~"runtime_extractor_.+"}`:                                                       true, // cannot be checked
		`up{job="runtime-extractor-controller"} == 0`:                                              true, // not the binary's
	} {
		if errs := checkExpr(reg, expr); (len(errs) > 0) != wantErr {
			t.Errorf("checkExpr(%s) = %v, want an error: %v", expr, errs, wantErr)
		}
	}
	for text, want := range map[string][]string{
		`most by {{ with query "topk(1, x)" }}{{ . | first | label "m" }}{{ end }}`: {"topk(1, x)"},
		`{{ query "a{b=\"c\"}" | first | value }}`:                                  {`a{b="c"}`},
		`no query here, nor {{ $labels.query }}`:                                    nil,
	} {
		got, errs := templateQueries(text)
		if len(errs) > 0 || !slices.Equal(got, want) {
			t.Errorf("templateQueries(%q) = %q, %v; want %q", text, got, errs, want)
		}
	}
	if _, errs := templateQueries(`{{ with printf "x{a=%q}" .Labels.a | query }}{{ end }}`); len(errs) == 0 {
		t.Error("a query built with printf was accepted")
	}
}

// TestRunbooksUseOnlyExportedMetrics: the metrics runbooks.md names exist,
// and each query it gives to run (promql '...') checks as an alert's does.
func TestRunbooksUseOnlyExportedMetrics(t *testing.T) {
	reg := binaryMetrics(t)
	data, err := os.ReadFile(filepath.FromSlash(runbooksFile))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, name := range regexp.MustCompile(`runtime_extractor_[a-z_]+`).FindAllString(doc, -1) {
		if _, ok := family(reg, name); !ok {
			t.Errorf("%s names %s, which the binary does not export", runbooksFile, name)
		}
	}
	queries := regexp.MustCompile(`promql '([^']+)'`).FindAllStringSubmatch(doc, -1)
	if len(queries) == 0 {
		t.Fatalf("%s gives no query", runbooksFile)
	}
	for _, q := range queries {
		for _, err := range checkExpr(reg, q[1]) {
			t.Errorf("%s: %v", runbooksFile, err)
		}
	}
}

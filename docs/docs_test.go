// Package docs_test keeps the written documentation in step with the code: the
// examples parse, every metric, Event reason and condition reason is documented,
// and the embedding guide shows the compiled example's code.
package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

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
	reg.MustRegister(metrics.NewBuildInfo("v0.0.0-docs")) // the binary registers it too
	// A vector without observations has no series to gather: give each one.
	m.ObserveTransition(fsm.Transition{From: fsm.StateDisabled, To: fsm.StateDeploying, Event: fsm.Enabled{}, Action: fsm.ActionApply})
	m.ObserveRepair("kubectl-patch")
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
		runtimeextractor.ReasonCreated, runtimeextractor.ReasonUpdated, runtimeextractor.ReasonDeleted,
		runtimeextractor.ReasonApplyFailed, runtimeextractor.ReasonDeleteFailed, runtimeextractor.ReasonTLSProfileUnknown,
		resources.EventReasonCreated, resources.EventReasonUpdated, resources.EventReasonDeleted,
		config.ReasonInvalidConfig,
		status.ReasonAsExpected, status.ReasonDisabled, status.ReasonRollingOut, status.ReasonUpgrading,
		status.ReasonRestoring, status.ReasonDeleting, status.ReasonApplyFailed, status.ReasonDeleteFailed,
		status.ReasonInvalidConfig, status.ReasonRolloutStuck, status.ReasonHolding, status.ReasonPodsUnavailable, runtimeextractor.ReasonRolloutStuck, status.ReasonStarting,
		status.ReasonConflictingWriter, runtimeextractor.ReasonConflictingWriter,
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

// helpFlag is one flag of the controller command as its --help prints it.
type helpFlag struct {
	short, typ string
	// def is what --help says the default is: pflag's "(default X)" with quotes
	// removed, or the command's own "(default: X)"; empty when it says nothing.
	def string
}

var (
	helpFlagLine = regexp.MustCompile(`^\s+(?:-(\S), )?--(\S+)(?: (\S+))?\s{2,}(.*)$`)
	helpDefault  = regexp.MustCompile(`\(default(?:: | )(.*)\)$`)
)

// commandFlags reads the controller command's flags from its --help output,
// testdata/cmd/help.golden, which the cmd package's golden test keeps current.
func commandFlags(t *testing.T) map[string]helpFlag {
	t.Helper()
	help := read(t, "../testdata/cmd/help.golden")
	_, section, ok := strings.Cut(help, "\nFlags:\n")
	if !ok {
		t.Fatal("help.golden has no Flags section")
	}
	section, _, _ = strings.Cut(section, "\n\n")
	flags := map[string]helpFlag{}
	for _, line := range strings.Split(section, "\n") {
		m := helpFlagLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("help.golden: unexpected flag line %q", line)
		}
		f := helpFlag{short: m[1], typ: m[3]}
		if d := helpDefault.FindStringSubmatch(m[4]); d != nil {
			f.def = strings.Trim(d[1], `"`)
		}
		flags[m[2]] = f
	}
	if len(flags) < 10 {
		t.Fatalf("help.golden lists only %d flags", len(flags))
	}
	return flags
}

// docFlag is one row of the flag tables of operations.md's "The binary".
type docFlag struct {
	short, def string
}

func documentedFlags(t *testing.T) map[string]docFlag {
	t.Helper()
	doc := read(t, "operations.md")
	start := strings.Index(doc, "\n## The binary\n")
	end := strings.Index(doc, "\n## Troubleshooting")
	if start < 0 || end < start {
		t.Fatal(`operations.md has no "The binary" section before "Troubleshooting"`)
	}
	flags := map[string]docFlag{}
	for _, line := range strings.Split(doc[start:end], "\n") {
		if !strings.HasPrefix(line, "| `-") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 {
			t.Errorf("operations.md: flag row without 3 cells: %s", line)
			continue
		}
		var f docFlag
		var long string
		for _, name := range strings.Split(strings.TrimSpace(cells[0]), ", ") {
			name = strings.Trim(name, "`")
			switch {
			case strings.HasPrefix(name, "--"):
				long = name[2:]
			case strings.HasPrefix(name, "-"):
				f.short = name[1:]
			}
		}
		f.def = strings.ReplaceAll(strings.TrimSpace(cells[1]), "`", "")
		if long == "" {
			t.Errorf("operations.md: flag row without a --name: %s", line)
			continue
		}
		flags[long] = f
	}
	return flags
}

// TestFlagTableMatchesTheCommand: the flag tables of operations.md list exactly
// the flags the controller command registers (controllercmd's, the controller's,
// --version, --help and klog's), with their shorthands and defaults.
func TestFlagTableMatchesTheCommand(t *testing.T) {
	registered, documented := commandFlags(t), documentedFlags(t)
	for name, f := range registered {
		d, ok := documented[name]
		if !ok {
			t.Errorf("operations.md's flag tables lack --%s", name)
			continue
		}
		if d.short != f.short {
			t.Errorf("--%s: operations.md gives the shorthand %q, the command %q", name, d.short, f.short)
		}
		// pflag prints no zero default: false for a bool, else empty or 0.
		want := []string{f.def}
		switch {
		case f.def != "":
		case f.typ == "":
			want = []string{"false"}
		default:
			want = []string{"none", "0"}
		}
		if !slices.Contains(want, d.def) {
			t.Errorf("--%s: operations.md says the default is %q, the command %q", name, d.def, strings.Join(want, `" or "`))
		}
	}
	for name := range documented {
		if _, ok := registered[name]; !ok {
			t.Errorf("operations.md documents --%s, which the command does not register", name)
		}
	}
	for _, klogFlag := range []string{"v", "vmodule", "logtostderr"} {
		if _, ok := registered[klogFlag]; !ok {
			t.Errorf("help.golden has no --%s: are klog's flags still registered?", klogFlag)
		}
	}
}

// TestNamespaceClaims: the namespace row says what the command does: the pod's
// namespace in a pod, openshift-insights outside one; the DaemonSet's namespace
// is fixed.
func TestNamespaceClaims(t *testing.T) {
	ns, ok := documentedFlags(t)["namespace"]
	if !ok {
		t.Fatal("operations.md does not document --namespace")
	}
	if want := "the pod's namespace in a pod, " + resources.Namespace + " outside one"; ns.def != want {
		t.Errorf("operations.md: --namespace defaults to %q, want %q", ns.def, want)
	}
	doc := read(t, "operations.md")
	for _, claim := range []string{
		"/var/run/secrets/kubernetes.io/serviceaccount/namespace",
		"The managed DaemonSet and `insights-config` are always in `" + resources.Namespace + "`",
	} {
		if !strings.Contains(doc, claim) {
			t.Errorf("operations.md does not say %q", claim)
		}
	}
}

// TestVersionClaims: the version is stamped the way the Makefile stamps it, and
// an unstamped build reports metrics.DevVersion.
func TestVersionClaims(t *testing.T) {
	doc, makefile := read(t, "operations.md"), read(t, "../Makefile")
	for _, claim := range []string{"-X main.version=", "git describe --tags --always --dirty"} {
		if !strings.Contains(makefile, claim) {
			t.Errorf("the Makefile's build does not use %q", claim)
		}
		if !strings.Contains(strings.ReplaceAll(doc, "\n", " "), claim) {
			t.Errorf("operations.md does not say %q", claim)
		}
	}
	if !strings.Contains(doc, "`"+metrics.DevVersion+"`") {
		t.Errorf("operations.md does not name the unstamped version %s", metrics.DevVersion)
	}
	if !strings.Contains(read(t, "metrics.md"), "`runtime_extractor_build_info`") {
		t.Error("metrics.md does not describe runtime_extractor_build_info")
	}
}

// TestStatusTimingClaims: the intervals operations.md gives for the status writes
// are the code's.
func TestStatusTimingClaims(t *testing.T) {
	doc := strings.Join(strings.Fields(read(t, "operations.md")), " ")
	minutes := func(d time.Duration) string { return fmt.Sprintf("%d minutes", int(d.Minutes())) }
	seconds := func(d time.Duration) string { return fmt.Sprintf("%d seconds", int(d.Seconds())) }
	for _, claim := range []string{
		"every `--resync` (" + minutes(runtimeextractor.DefaultResync) + " by default)",
		"stayed the same for " + seconds(runtimeextractor.StatusSettle),
		"waits up to " + seconds(runtimeextractor.StatusMaxDelay),
		"at most once every " + seconds(runtimeextractor.StatusMaxDelay),
		"field manager `" + status.FieldManager + "`",
	} {
		if !strings.Contains(doc, claim) {
			t.Errorf("operations.md does not say %q", claim)
		}
	}
}

package testcluster_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// recordingTB captures how ForTest gives up, without ending the real test.
type recordingTB struct {
	testing.TB
	failed, skipped string
}

type gaveUp struct{}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(gaveUp{})
}
func (r *recordingTB) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	panic(gaveUp{})
}

func forTestWithoutBinaries(t *testing.T) (rec *recordingTB) {
	t.Helper()
	rec = &recordingTB{TB: t}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(gaveUp); !ok {
				panic(r)
			}
		}
	}()
	testcluster.ForTest(rec, testcluster.Options{BinDir: t.TempDir()})
	t.Fatal("ForTest returned a cluster from an empty bin dir")
	return rec
}

func TestForTestFailsWhenBinariesMissing(t *testing.T) {
	t.Setenv(testcluster.SkipEnv, "")
	rec := forTestWithoutBinaries(t)
	if rec.skipped != "" {
		t.Fatalf("skipped (%q) without the opt-out variable", rec.skipped)
	}
	for _, want := range []string{"make tools", "kube-apiserver", "E2E_SKIP=1"} {
		if !strings.Contains(rec.failed, want) {
			t.Errorf("failure %q does not mention %q", rec.failed, want)
		}
	}
}

func TestForTestSkipsWithOptOut(t *testing.T) {
	t.Setenv(testcluster.SkipEnv, "1")
	rec := forTestWithoutBinaries(t)
	if rec.failed != "" {
		t.Fatalf("failed (%q) despite E2E_SKIP=1", rec.failed)
	}
	for _, want := range []string{"E2E_SKIP=1", "make tools"} {
		if !strings.Contains(rec.skipped, want) {
			t.Errorf("skip reason %q does not mention %q", rec.skipped, want)
		}
	}
}

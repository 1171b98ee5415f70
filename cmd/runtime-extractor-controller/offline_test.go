package main

import (
	"bytes"
	"context"
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/insights-runtime-extractor/controller/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/cmd")

func runCLI(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand(context.Background())
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestGoldenOutputs compares simulate and diagram output with testdata/cmd;
// -update rewrites them (review the diff).
func TestGoldenOutputs(t *testing.T) {
	cases := []struct {
		golden string
		stdin  string
		args   []string
	}{
		{"simulate-upgrade.golden", "", []string{"simulate", "../../testdata/fsm/upgrade.txt"}},
		{"simulate-args.golden", "", []string{"simulate", "--initial", "Running", "Modified 2", "ApplyFailed forbidden", "Enabled", "Applied 3", "RolloutComplete 2", "RolloutComplete 3"}},
		{"simulate-stdin.golden", "initial Deleting\nEnabled\nApplied 1\n", []string{"simulate", "-"}},
		{"diagram-mermaid.golden", "", []string{"diagram", "--format", "mermaid"}},
		{"diagram-dot.golden", "", []string{"diagram", "--format", "dot"}},
		// Every flag of the controller command, which docs/docs_test.go checks
		// against the flag table of docs/operations.md.
		{"help.golden", "", []string{"--help"}},
	}
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			got, err := runCLI(t, tc.stdin, tc.args...)
			if err != nil {
				t.Fatalf("%v: %v\n%s", tc.args, err, got)
			}
			path := filepath.Join("../../testdata/cmd", tc.golden)
			want := golden.Want(t, path, []byte(got), *update, "run go test ./cmd/... -update")
			if got != string(want) {
				t.Errorf("%v: output differs from %s:\n%s", tc.args, path, got)
			}
		})
	}
}

func TestOfflineCommandErrors(t *testing.T) {
	for _, args := range [][]string{
		{"diagram", "--format", "png"},
		{"simulate"},
		{"simulate", "Bogus"},
		{"simulate", "--initial", "Nowhere", "Enabled"},
	} {
		if out, err := runCLI(t, "", args...); err == nil {
			t.Errorf("%v succeeded:\n%s", args, out)
		}
	}
}

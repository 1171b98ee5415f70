package fsmtext

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/internal/golden"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the testdata/fsm scenario transcripts and the generated docs from what the machine does")

// TestScenarios plays every testdata/fsm/*.txt file. Each file is a transcript: the
// expected transition of every step is written after "->". With -rewrite the
// expectations are regenerated from the machine (review the diff).
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("../../../testdata/fsm/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files found: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			sc, err := ParseScenario(bytes.NewReader(raw))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			ts, err := sc.Run()
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if *rewrite {
				out := header(string(raw)) + Transcript(sc.Initial, ts)
				if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			for i, st := range sc.Steps {
				if st.WantState == "" {
					t.Errorf("%s:%d: step has no expectation (run with -rewrite)", file, st.Line)
					continue
				}
				if ts[i].To != st.WantState || ts[i].Action != st.WantAction {
					t.Errorf("%s:%d: %s: got %s %s, want %s %s", file, st.Line, formatEvent(st.Event),
						ts[i].To, ts[i].Action, st.WantState, st.WantAction)
				}
			}
		})
	}
}

// header keeps a scenario's leading comment lines across a rewrite.
func header(s string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// TestGeneratedDocsAreCurrent compares the committed diagrams with what the table
// renders now; `make docs` (or -rewrite) regenerates them.
func TestGeneratedDocsAreCurrent(t *testing.T) {
	for file, want := range map[string]string{
		"../../../docs/state-machine.md":  Document(),
		"../../../docs/state-machine.dot": DOT(),
	} {
		if got := golden.Want(t, file, []byte(want), *rewrite, "run `make docs`"); string(got) != want {
			t.Errorf("%s is stale: run `make docs`", file)
		}
	}
}

func TestParseScenarioErrors(t *testing.T) {
	for i, text := range []string{
		"initial Nowhere\n",
		"Frobnicated\n",
		"Modified x\n",
		"Enabled extra\n",
		"Enabled -> Running\n",
		"Enabled -> Running Dance\n",
		"VersionChanged 4.1\n",
	} {
		if _, err := ParseScenario(strings.NewReader(text)); err == nil {
			t.Errorf("#%d: %q parsed without error", i, text)
		}
	}
}

func TestFormatEventRoundTrips(t *testing.T) {
	for _, ev := range []fsm.Event{
		fsm.Enabled{}, fsm.Disabled{}, fsm.VersionChanged{From: "4.21.0", To: "4.22.0"}, fsm.Modified{Generation: 2},
		fsm.Deleted{}, fsm.RolloutComplete{Generation: 1}, fsm.Applied{Generation: 1}, fsm.AppliedUnchanged{Generation: 1},
		fsm.ApplyFailed{Err: errors.New("boom")}, fsm.DeleteDone{}, fsm.DeleteFailed{Err: errors.New("boom")},
	} {
		name := ev.Name()
		got, err := parseEvent(strings.Fields(formatEvent(ev)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if formatEvent(got) != formatEvent(ev) {
			t.Errorf("%s: round trip gave %q, want %q", name, formatEvent(got), formatEvent(ev))
		}
	}
}

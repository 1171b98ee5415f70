package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/insights-runtime-extractor/controller/cmd/runtime-extractor-controller/fsmtext"
)

// TestReadmeDiagramIsCurrent fails when the transition table changed and
// `make docs` was not run.
func TestReadmeDiagramIsCurrent(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatalf("read README.md: %v", err)
	}
	got, err := currentBlock(doc)
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if want := fence([]byte(fsmtext.Mermaid())); string(got) != string(want) {
		t.Errorf("README.md's state diagram is stale: run `make docs`\n got:\n%s\nwant:\n%s", got, want)
	}
}

// TestReplaceBlock fences the source between the markers, whatever sat there
// before, and leaves a block it already wrote as it is.
func TestReplaceBlock(t *testing.T) {
	for _, tc := range []struct {
		name, doc, source, want string
	}{{
		name:   "old lines",
		doc:    "# T\n\n<!-- state-diagram:begin -->\nold\nlines\n<!-- state-diagram:end -->\n\nafter\n",
		source: "stateDiagram-v2\n    A --> B\n",
		want:   "# T\n\n<!-- state-diagram:begin -->\n```mermaid\nstateDiagram-v2\n    A --> B\n```\n<!-- state-diagram:end -->\n\nafter\n",
	}, {
		name:   "empty block",
		doc:    "<!-- state-diagram:begin -->\n<!-- state-diagram:end -->\n",
		source: "x",
		want:   "<!-- state-diagram:begin -->\n```mermaid\nx\n```\n<!-- state-diagram:end -->\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := replaceBlock([]byte(tc.doc), []byte(tc.source))
			if err != nil {
				t.Fatalf("replaceBlock: %v", err)
			}
			if string(got) != tc.want {
				t.Errorf("replaceBlock:\n got %q\nwant %q", got, tc.want)
			}
			again, err := replaceBlock(got, []byte(tc.source))
			if err != nil || string(again) != tc.want {
				t.Errorf("replaceBlock is not idempotent: %q, %v", again, err)
			}
		})
	}
}

func TestReplaceBlockRejectsBadMarkers(t *testing.T) {
	for name, doc := range map[string]string{
		"missing":  "no markers\n",
		"reversed": "<!-- state-diagram:end -->\n<!-- state-diagram:begin -->\n",
		"twice":    "<!-- state-diagram:begin -->\n<!-- state-diagram:end -->\n<!-- state-diagram:begin -->\n",
		"sameLine": "<!-- state-diagram:begin --> <!-- state-diagram:end -->\n",
	} {
		if _, err := replaceBlock([]byte(doc), []byte("x")); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), "marker") {
			t.Errorf("%s: error %q does not mention the markers", name, err)
		}
	}
}

func TestRunWritesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(path, []byte("a\n<!-- state-diagram:begin -->\n<!-- state-diagram:end -->\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(path, strings.NewReader("stateDiagram-v2\n")); err != nil {
		t.Fatalf("run: %v", err)
	}
	got, _ := os.ReadFile(path)
	if !strings.Contains(string(got), "```mermaid\nstateDiagram-v2\n```\n") {
		t.Errorf("file not updated: %q", got)
	}
	if err := run(path, strings.NewReader("  \n")); err == nil {
		t.Error("run accepted an empty diagram")
	}
}

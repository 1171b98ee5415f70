package golden

import (
	"path/filepath"
	"testing"
)

func TestWantRewritesThenReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "out.txt")
	if got := string(Want(t, path, []byte("first"), true, "")); got != "first" {
		t.Fatalf("after a rewrite Want = %q, want %q", got, "first")
	}
	if got := string(Want(t, path, []byte("second"), false, "")); got != "first" {
		t.Fatalf("without a rewrite Want = %q, want the file's %q", got, "first")
	}
}

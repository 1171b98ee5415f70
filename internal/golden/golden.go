// Package golden serves the tests that compare an output with a file committed
// in the repository: each reads the file, or, asked to rewrite it, writes the
// output there. It is for tests only.
package golden

import (
	"os"
	"path/filepath"
	"testing"
)

// Want returns what the file at path holds. With rewrite, it first writes got
// there (creating its folder), so the comparison that follows passes and the
// diff shows in review. regenerate tells a reader how to rewrite it when the
// file is missing.
func Want(t testing.TB, path string, got []byte, rewrite bool, regenerate string) []byte {
	t.Helper()
	if rewrite {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("create the folder of %s: %v", path, err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("rewrite %s: %v", path, err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s (%s): %v", path, regenerate, err)
	}
	return want
}

package core

import "testing"

// restoredWords words what a repair put back (resources.Result.Restored).
func TestRestoredWords(t *testing.T) {
	if got := restoredWords([]string{"container extractor image", "removed container sidecar", "tolerations", "volumes", "affinity", "spec"}); got != ": restored container extractor image, tolerations, volumes; removed container sidecar and 2 more" {
		t.Errorf("restoredWords = %q", got)
	}
}

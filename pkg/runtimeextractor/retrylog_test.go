package runtimeextractor

import (
	"strings"
	"testing"

	"github.com/insights-runtime-extractor/controller/pkg/internal/logcapture"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// A RELATED_IMAGE_* value is refused, and every apply fails quoting it, at
// any length. The retry's log line says so within the cap that conditions
// and Events have, once per retry, not the whole value each time.
func TestRetryLogLineIsCapped(t *testing.T) {
	huge := "quay.io/someone/" + strings.Repeat("X", 100*1024)
	t.Setenv(resources.EnvExtractorImage, huge)
	logged := logcapture.Klog(t)
	h := startWith(t, func(h *harness) {
		// Read the images from the environment, as the binary does.
		h.opts = append(h.opts, func(s *settings) { s.images = nil })
	})
	retries := func() []string {
		var out []string
		for _, l := range strings.Split(logged(), "\n") {
			if strings.Contains(l, "retrying in ") {
				out = append(out, l)
			}
		}
		return out
	}
	h.eventually("two retries logged", func() bool { return len(retries()) >= 2 })
	h.stop()
	if strings.Contains(logged(), strings.Repeat("X", 2*status.MaxMessageBytes)) {
		t.Errorf("a log line quotes more than %d bytes of the refused value", 2*status.MaxMessageBytes)
	}
	for _, l := range retries() {
		if !strings.Contains(l, resources.EnvExtractorImage) {
			t.Errorf("the retry's log line does not say what failed: %.300s", l)
		}
		// klog's header and the line's own words come on top of the capped error.
		if limit := status.MaxMessageBytes + 200; len(l) > limit {
			t.Errorf("a retry's log line is %d bytes, want at most %d: %.300s...", len(l), limit, l)
		}
	}
}

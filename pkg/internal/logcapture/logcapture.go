// Package logcapture lets a test read what klog logged while it ran.
package logcapture

import (
	"bytes"
	"io"
	"os"
	"sync"
	"testing"

	"k8s.io/klog/v2"
)

// Klog sends klog's output to a buffer until the test ends, and returns a
// function that reads what was logged so far.
func Klog(t testing.TB) func() string {
	t.Helper()
	var mu sync.Mutex
	var buf bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(lockedWriter{mu: &mu, w: &buf})
	t.Cleanup(func() {
		klog.Flush()
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
	})
	return func() string {
		klog.Flush()
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
}

// lockedWriter serialises klog's writes with the reads of the buffer.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

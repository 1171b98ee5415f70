package config

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a Source leaves goroutines behind once its
// context is cancelled.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

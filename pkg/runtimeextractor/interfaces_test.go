package runtimeextractor

import (
	"testing"

	"github.com/insights-runtime-extractor/controller/pkg/config"
)

// seedNotifier has only the seed's two methods, as a host's own notifier.
type seedNotifier struct{}

func (seedNotifier) ConfigChanged() (<-chan struct{}, func()) { return nil, func() {} }
func (seedNotifier) Config() *config.InsightsConfiguration    { return &config.InsightsConfiguration{} }

// configSourceOf answers for a host's notifier what it cannot tell, and
// takes every answer a notifier can give from it.
func TestConfigSourceOf(t *testing.T) {
	plain := configSourceOf(seedNotifier{})
	if !plain.HasGoodConfig() || plain.LastError() != nil || !plain.HasSynced() {
		t.Errorf("seed notifier: good=%v err=%v synced=%v; want true, nil, true", plain.HasGoodConfig(), plain.LastError(), plain.HasSynced())
	}

	f := newFakeConfig() // tells HasGoodConfig and LastError, not HasSynced
	f.set(false, true)
	f.good = false
	partial := configSourceOf(f)
	if partial.HasGoodConfig() || partial.LastError() == nil || !partial.HasSynced() {
		t.Errorf("partial notifier: good=%v err=%v synced=%v; want false, its error, true", partial.HasGoodConfig(), partial.LastError(), partial.HasSynced())
	}

	full := config.NewSource(nil, nil)
	if got := configSourceOf(full); got != configSource(full) {
		t.Errorf("config.Source is a configSource itself, got %T", got)
	}
}

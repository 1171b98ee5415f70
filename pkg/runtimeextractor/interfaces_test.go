package runtimeextractor

import (
	"testing"

	"github.com/insights-runtime-extractor/controller/pkg/config"
)

// seedNotifier has only the seed's two methods, as a host's own notifier.
type seedNotifier struct{}

func (seedNotifier) ConfigChanged() (<-chan struct{}, func()) { return nil, func() {} }
func (seedNotifier) Config() *config.InsightsConfiguration    { return &config.InsightsConfiguration{} }

// A host's notifier is asked what it can tell, and the rest is answered for it.
func TestConfigAnswersOfANotifier(t *testing.T) {
	var plain seedNotifier
	if !hasGoodConfig(plain) || configError(plain) != nil || !configSynced(plain) {
		t.Errorf("seed notifier: good=%v err=%v synced=%v; want true, nil, true", hasGoodConfig(plain), configError(plain), configSynced(plain))
	}

	f := newFakeConfig() // tells HasGoodConfig and LastError, not HasSynced
	f.set(false, true)
	f.good = false
	if hasGoodConfig(f) || configError(f) == nil || !configSynced(f) {
		t.Errorf("partial notifier: good=%v err=%v synced=%v; want false, its error, true", hasGoodConfig(f), configError(f), configSynced(f))
	}

	full := config.NewSource(nil, nil) // not synced before its informer runs
	if configSynced(full) {
		t.Error("config.Source's HasSynced is not asked")
	}
}

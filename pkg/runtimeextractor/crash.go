package runtimeextractor

import (
	"runtime/debug"

	"k8s.io/klog/v2"
)

// recovered ends a panic on one of the library's goroutines (what names it) and logs it with its
// stack: embedded, a bug of ours must not take the host's process down (client-go's HandleCrash
// would). The next wake-up or the resync redoes what it cut short.
func recovered(what string) {
	if r := recover(); r != nil {
		klog.Errorf("runtime extractor: recovered from a panic in %s: %v\n%s", what, r, debug.Stack())
	}
}

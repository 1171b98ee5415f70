package runtimeextractor

import (
	"runtime/debug"

	"k8s.io/klog/v2"
)

// recovered ends a panic in the library's code on one of its goroutines
// (what names it) and logs it with its stack. Embedded, the library shares
// its process with the host's own work (the Insights Operator's gathering),
// which a bug of ours must not take down: client-go's HandleCrash would
// crash the process. Deferred at the top of every goroutine the library
// starts, of each wake-up of the control loop and of each informer handler
// (docs/embedding.md lists them). What the panic interrupted is done again
// by the next wake-up or the resync, which re-reads the cluster.
func recovered(what string) {
	if r := recover(); r != nil {
		klog.Errorf("runtime extractor: recovered from a panic in %s: %v\n%s", what, r, debug.Stack())
	}
}

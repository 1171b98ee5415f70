package status

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/insights-runtime-extractor/controller/fsm"
)

// terminatingMessage says what the deletion waits for: a DELETE that returned is not an object gone.
func terminatingMessage(s Snapshot) string {
	msg := "removing the runtime extractor, as insights-config disables it: the DaemonSet is being deleted"
	if len(s.Finalizers) == 0 {
		return msg + "; its pods run until it is gone"
	}
	return msg + waitsFor(s) + "; its pods run until then"
}

// waitsFor names the finalizers the deletion waits for, "" when none.
func waitsFor(s Snapshot) string {
	if len(s.Finalizers) == 0 {
		return ""
	}
	return fmt.Sprintf(" and waits for %s %s to be removed",
		map[bool]string{true: "finalizer", false: "finalizers"}[len(s.Finalizers) == 1], strings.Join(s.Finalizers, ", "))
}

// unavailableMessage names how many nodes that should run a pod have none
// available, against maxUnavailable, and a few of them.
func unavailableMessage(s Snapshot) string {
	n := s.Desired - s.Available
	if n <= 0 {
		return ""
	}
	msg := fmt.Sprintf("; %d nodes have no available pod", n)
	if n == 1 {
		msg = "; 1 node has no available pod"
	}
	switch over, known := overMaxUnavailable(s); {
	case !known:
	case !over:
		msg += fmt.Sprintf(" (within maxUnavailable %d)", s.MaxUnavailable)
	default:
		msg += fmt.Sprintf(" (more than maxUnavailable %d)", s.MaxUnavailable)
	}
	switch {
	case len(s.UnavailableNodes) > 0:
		msg += ": " + strings.Join(s.UnavailableNodes, ", ")
		if int(n) > len(s.UnavailableNodes) {
			msg += ", ..."
		}
	case s.UnavailableNodesDenied:
		msg += "; node names unavailable: " + DeniedPodsList + " forbidden"
	}
	return msg
}

const disabledMessage = "runtime extractor is disabled by insights-config"

// MaxMessageBytes bounds a condition or Event message: an error can quote
// insights-config whole (hundreds of kilobytes), and the gist is enough.
const MaxMessageBytes = 1024

// CapMessage cuts msg to MaxMessageBytes on a UTF-8 boundary, ending with a marker
// of how many bytes were cut.
func CapMessage(msg string) string {
	if len(msg) <= MaxMessageBytes {
		return msg
	}
	// The marker for len(msg) is at least as long as the one for the bytes
	// actually cut, so reserving its length keeps the result within bounds.
	keep := MaxMessageBytes - len(cutMarker(len(msg)))
	for keep > 0 && !utf8.RuneStart(msg[keep]) {
		keep--
	}
	return msg[:keep] + cutMarker(len(msg)-keep)
}

func cutMarker(n int) string { return fmt.Sprintf(" ... [%d bytes cut]", n) }

// progressMessage counts the nodes that run a pod of the current template,
// available or not (Available says that).
func progressMessage(s Snapshot) string {
	var verb string
	switch s.State {
	case fsm.StateUpgrading:
		verb = "upgrading"
	case fsm.StateDrifted:
		verb = "restoring after an external change: rolling out"
	default:
		verb = "rolling out"
	}
	to := ""
	if s.Version != "" {
		to = " to " + s.Version
	}
	if s.Updated >= s.Desired { // not RolledOut, so the counts predate the current generation
		return verb + to + ": waiting for the DaemonSet controller to observe the new spec"
	}
	return fmt.Sprintf("%s %d/%d nodes%s", verb, s.Updated, s.Desired, to)
}

func atVersion(v string) string {
	if v == "" {
		return ""
	}
	return " at version " + v
}

// failureMessage names no count and no delay: they change with every retry, so a
// retry that fails the same way writes nothing; the Warning Event and metrics carry them.
func failureMessage(s Snapshot) string {
	action := "apply"
	if failureReason(s.State) == ReasonDeleteFailed {
		action = "delete"
	}
	return fmt.Sprintf("the last %s failed: %v; retrying with backoff", action, s.LastError)
}

// roundBackoff drops sub-second noise so a duration stays readable.
func roundBackoff(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

func configMessage(err error) string {
	return fmt.Sprintf("insights-config rejected, keeping the last good config: %v", err)
}

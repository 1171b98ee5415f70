package status

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// RolloutStuck describes a rollout that made no progress for the deadline.
// It is "for a while" by construction (the deadline is its inertia), so
// Degraded reports it at once.
type RolloutStuck struct {
	// For is how long it has made no progress (at least the deadline).
	For time.Duration
	// NotReady counts the nodes that should run a pod but have none available.
	NotReady int32
	// Nodes names a few of them (those with a pod that is not ready).
	Nodes []string
	// Warning is the newest warning Event on the DaemonSet, e.g.
	// "FailedCreate: ..."; empty when there is none.
	Warning string
	// Denied names the reads of the diagnosis that RBAC forbids
	// (DeniedPodsList, DeniedEventsList): what they tell is missing, and
	// the message says so.
	Denied []string
}

// Message says it, for s: in RuntimeExtractorDegraded when the rollout
// leaves too few pods, else in RuntimeExtractorProgressing, and in the
// RolloutStuck Event either way.
func (r *RolloutStuck) Message(s Snapshot) string {
	msg := fmt.Sprintf("rollout made no progress for %s: %d of %d nodes not ready", roundBackoff(r.For), r.NotReady, s.Desired)
	switch {
	case len(r.Nodes) > 0:
		msg += " (" + strings.Join(r.Nodes, ", ")
		if int(r.NotReady) > len(r.Nodes) {
			msg += ", ..."
		}
		msg += ")"
	case slices.Contains(r.Denied, DeniedPodsList):
		msg += " (node names unavailable: " + DeniedPodsList + " forbidden)"
	}
	switch {
	case r.Warning != "":
		msg += "; newest warning on the DaemonSet: " + r.Warning
	case slices.Contains(r.Denied, DeniedEventsList):
		msg += "; newest warning on the DaemonSet unavailable: " + DeniedEventsList + " forbidden"
	}
	return msg
}

func (r *RolloutStuck) equal(o *RolloutStuck) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.NotReady == o.NotReady && slices.Equal(r.Nodes, o.Nodes) && r.Warning == o.Warning && slices.Equal(r.Denied, o.Denied)
}

// ConflictingWriter describes a tug-of-war over the DaemonSet: writers other
// than the controller that keep undoing its repairs.
type ConflictingWriter struct {
	// Writers name those whose changes the controller repaired during the
	// fight, most repairs first, at most a few.
	Writers []WriterCount
	// Repairs counts the controller's repairs since the fight's first one.
	Repairs int
	// For is the time since the fight's first repair.
	For time.Duration
	// RepairEvery is the wait between two repairs now (the repair backoff).
	RepairEvery time.Duration
}

// WriterCount is one writer of a fight: its field manager, or a description
// when managedFields names no one, and how many of its changes were repaired.
type WriterCount struct {
	Manager string
	Repairs int
}

// message names the writers, not how often each undid a repair nor for how
// long: those grow during the fight, and the Warning Events and the metrics
// carry them. ConflictingWriter is "for a while" by construction (the verdict
// takes several undos, or a spent repair budget), so it needs no inertia of
// its own.
func (w *ConflictingWriter) message() string {
	return fmt.Sprintf("another writer keeps undoing the controller's repairs of the DaemonSet: changes by %s; "+
		"repairs now come at most every %s. Likely another copy of this controller with another manifest "+
		"(e.g. an operator that embeds it running next to the standalone binary) or a GitOps tool that applies its own "+
		"version of the DaemonSet: find the writer in the DaemonSet's metadata.managedFields and stop one of the two",
		strings.Join(w.managers(), ", "), roundBackoff(w.RepairEvery))
}

// Tally is what the message leaves out, for the Warning Event that reports
// the fight, e.g. "6 undone repairs in 32s: gitops-fight (5), kubectl-edit (1)".
func (w *ConflictingWriter) Tally() string {
	names := make([]string, 0, len(w.Writers))
	for _, wc := range w.Writers {
		names = append(names, fmt.Sprintf("%s (%d)", wc.Manager, wc.Repairs))
	}
	return fmt.Sprintf("%d undone repairs in %s: %s", w.Repairs, roundBackoff(w.For), strings.Join(names, ", "))
}

// managers are the writers' names, sorted.
func (w *ConflictingWriter) managers() []string {
	names := make([]string, 0, len(w.Writers))
	for _, wc := range w.Writers {
		names = append(names, wc.Manager)
	}
	slices.Sort(names)
	return names
}

// equal compares what the message says: For and the counts grow by
// themselves, and a status write for each repair of a fight would be a fight
// of its own.
func (w *ConflictingWriter) equal(o *ConflictingWriter) bool {
	if w == nil || o == nil {
		return w == o
	}
	return w.RepairEvery == o.RepairEvery && slices.Equal(w.managers(), o.managers())
}

// RepairWait is someone else's change whose repair the repair gate holds
// back until its budget allows it.
type RepairWait struct {
	// Writers name whose change waits: field managers, or a description
	// when managedFields names no one; sorted.
	Writers []string
	// At is when the repair will be made.
	At time.Time
}

// message gives the time, not a countdown, so that it does not change while
// the repair waits.
func (w *RepairWait) message() string {
	return fmt.Sprintf("the change by %s waits for its repair until %s: the repair budget is spent",
		strings.Join(w.Writers, ", "), w.At.UTC().Format(time.RFC3339))
}

func (w *RepairWait) equal(o *RepairWait) bool {
	if w == nil || o == nil {
		return w == o
	}
	return w.At.Equal(o.At) && slices.Equal(w.Writers, o.Writers)
}

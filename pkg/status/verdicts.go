package status

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// RolloutStuck describes a rollout that made no progress for the deadline, its inertia: Degraded says it at once.
type RolloutStuck struct {
	For      time.Duration // without progress, at least the deadline
	NotReady int32         // nodes that should run a pod but have none available
	Nodes    []string      // a few of them (those with a pod that is not ready)
	Warning  string        // the newest warning Event on the DaemonSet, e.g. "FailedCreate: ..."
	Denied   []string      // the diagnosis reads RBAC forbids (Denied*); the message says so
}

// Message says it for s: in Degraded when the rollout leaves too few pods, else in Progressing; and in the Event.
func (r *RolloutStuck) Message(s Snapshot) string {
	msg := fmt.Sprintf("rollout made no progress for %s: %d of %d nodes not ready", roundBackoff(r.For), r.NotReady, s.Desired)
	switch {
	case len(r.Nodes) > 0:
		msg += " (" + someNodes(r.Nodes, r.NotReady) + ")"
	case slices.Contains(r.Denied, DeniedPodsList):
		msg += " (" + nodeNamesDenied + ")"
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

// ConflictingWriter describes a tug-of-war: other writers keep undoing the controller's repairs of the DaemonSet.
type ConflictingWriter struct {
	Writers     []WriterCount // whose changes were repaired, most repairs first, at most a few
	Repairs     int           // since the fight's first repair
	For         time.Duration // since the fight's first repair
	RepairEvery time.Duration // the repair backoff now
}

// WriterCount is one writer of a fight: its field manager (or a description), and how many changes were repaired.
type WriterCount struct {
	Manager string
	Repairs int
}

// message names the writers, not their counts nor the fight's length: those grow, and the Warning Events and
// metrics carry them. It needs no inertia: the verdict takes several undos, or a spent repair budget.
func (w *ConflictingWriter) message() string {
	return fmt.Sprintf("another writer keeps undoing the controller's repairs of the DaemonSet: changes by %s; "+
		"repairs now come at most every %s. Likely another copy of this controller with another manifest "+
		"(e.g. an operator that embeds it running next to the standalone binary) or a GitOps tool that applies its own "+
		"version of the DaemonSet: find the writer in the DaemonSet's metadata.managedFields and stop one of the two",
		strings.Join(w.managers(), ", "), roundBackoff(w.RepairEvery))
}

// Tally is what message leaves out, for the Warning Event that reports the fight.
func (w *ConflictingWriter) Tally() string {
	names := make([]string, 0, len(w.Writers))
	for _, wc := range w.Writers {
		names = append(names, fmt.Sprintf("%s (%d)", wc.Manager, wc.Repairs))
	}
	return fmt.Sprintf("%d undone repairs in %s: %s", w.Repairs, roundBackoff(w.For), strings.Join(names, ", "))
}

func (w *ConflictingWriter) managers() []string {
	names := make([]string, 0, len(w.Writers))
	for _, wc := range w.Writers {
		names = append(names, wc.Manager)
	}
	slices.Sort(names)
	return names
}

// equal compares what message says: a status write for each repair of a fight would be a fight of its own.
func (w *ConflictingWriter) equal(o *ConflictingWriter) bool {
	if w == nil || o == nil {
		return w == o
	}
	return w.RepairEvery == o.RepairEvery && slices.Equal(w.managers(), o.managers())
}

// RepairWait is someone else's change whose repair the repair gate holds back until its budget allows it.
type RepairWait struct {
	Writers []string  // whose change waits, sorted: field managers, or descriptions
	At      time.Time // when the repair will be made
}

func (w *RepairWait) equal(o *RepairWait) bool {
	if w == nil || o == nil {
		return w == o
	}
	return w.At.Equal(o.At) && slices.Equal(w.Writers, o.Writers)
}

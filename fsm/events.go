package fsm

import "fmt"

// EventName names an event type; the transition table is keyed by it.
type EventName string

// The event names, one per concrete event type.
const (
	EventEnabled          EventName = "Enabled"
	EventDisabled         EventName = "Disabled"
	EventVersionChanged   EventName = "VersionChanged"
	EventModified         EventName = "Modified"
	EventDeleted          EventName = "Deleted"
	EventRolloutComplete  EventName = "RolloutComplete"
	EventApplied          EventName = "Applied"
	EventAppliedUnchanged EventName = "AppliedUnchanged"
	EventApplyFailed      EventName = "ApplyFailed"
	EventDeleteDone       EventName = "DeleteDone"
	EventDeleteFailed     EventName = "DeleteFailed"
)

// EventNames lists every event name in table column order (a new slice on each call).
func EventNames() []EventName {
	return []EventName{EventEnabled, EventDisabled, EventVersionChanged, EventModified, EventDeleted, EventRolloutComplete,
		EventApplied, EventAppliedUnchanged, EventApplyFailed, EventDeleteDone, EventDeleteFailed}
}

// Event is a typed fact fed to the machine.
type Event interface{ Name() EventName }

type (
	// Enabled says the observed config enables the extractor; also the level re-assert.
	Enabled struct{}
	// Disabled says the observed config disables the extractor; also the level re-assert.
	Disabled struct{}
	// VersionChanged says the cluster's target release version changed.
	VersionChanged struct{ From, To string }
	// Modified says someone else changed the DaemonSet's spec, owned labels or annotations, or created it.
	Modified struct{ Generation int64 }
	// Deleted says the DaemonSet disappeared.
	Deleted struct{}
	// RolloutComplete says every node runs object UID's Generation (updated == desired);
	// unavailable pods leave nothing to roll out (conditions report them). Fire guards it.
	RolloutComplete struct {
		UID        string
		Generation int64
	}
	// Applied says an apply created the DaemonSet or moved its generation, so its pods roll.
	Applied struct {
		UID        string
		Generation int64
	}
	// AppliedUnchanged says an apply left the generation, so the pods, as they were.
	AppliedUnchanged struct {
		UID        string
		Generation int64
	}
	// ApplyFailed reports a failed apply; Err says why.
	ApplyFailed struct{ Err error }
	// DeleteDone says the DaemonSet is gone (deleted now, or already absent).
	DeleteDone struct{}
	// DeleteFailed reports a failed delete; Err says why.
	DeleteFailed struct{ Err error }
)

// Name implements Event.
func (Enabled) Name() EventName          { return EventEnabled }
func (Disabled) Name() EventName         { return EventDisabled }
func (VersionChanged) Name() EventName   { return EventVersionChanged }
func (Modified) Name() EventName         { return EventModified }
func (Deleted) Name() EventName          { return EventDeleted }
func (RolloutComplete) Name() EventName  { return EventRolloutComplete }
func (Applied) Name() EventName          { return EventApplied }
func (AppliedUnchanged) Name() EventName { return EventAppliedUnchanged }
func (ApplyFailed) Name() EventName      { return EventApplyFailed }
func (DeleteDone) Name() EventName       { return EventDeleteDone }
func (DeleteFailed) Name() EventName     { return EventDeleteFailed }

// Describe renders an event with its payload, e.g. "VersionChanged(4.21.0 -> 4.22.0)".
func Describe(e Event) string {
	switch p := e.(type) {
	case nil:
		return "<nil>"
	case VersionChanged:
		return fmt.Sprintf("%s(%s -> %s)", e.Name(), p.From, p.To)
	case interface{ generation() int64 }:
		return fmt.Sprintf("%s(gen=%d)", e.Name(), p.generation())
	case interface{ failure() error }:
		return fmt.Sprintf("%s(%v)", e.Name(), p.failure())
	}
	return string(e.Name())
}

func (e Modified) generation() int64         { return e.Generation }
func (e RolloutComplete) generation() int64  { return e.Generation }
func (e Applied) generation() int64          { return e.Generation }
func (e AppliedUnchanged) generation() int64 { return e.Generation }
func (e ApplyFailed) failure() error         { return e.Err }
func (e DeleteFailed) failure() error        { return e.Err }

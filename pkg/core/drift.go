package core

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DriftKind classifies an external change of the managed DaemonSet (drift_events_total's kind).
type DriftKind string

const (
	DriftModified DriftKind = "modified" // the spec changed (metadata.generation moved), or the object appeared
	DriftDeleted  DriftKind = "deleted"
	DriftMetadata DriftKind = "metadata" // an owned label or annotation changed: no generation moves
)

// Edit is a change a managedFields entry records: who made it, how, when.
type Edit struct {
	Manager, Operation string
	Time               time.Time
}

func (e Edit) String() string {
	return fmt.Sprintf("%s (%s at %s)", e.Manager, e.Operation, e.Time.UTC().Format(time.RFC3339))
}

// Observation is one change of the DaemonSet the informer saw, whoever made it. Whose it is is decided
// when the loop drains it (Classify): an own write's event may come before its apply returned.
type Observation struct {
	Kind       DriftKind
	UID        types.UID
	Generation int64
	Expected   bool              // a deletion of an object known gone: counted (or own) then
	Meta       map[string]string // owned metadata seen
	Version    string            // the resourceVersion seen
	// MetaDamaged: a DriftModified that also lost or changed owned metadata, which is drift even
	// when the spec change is the controller's (an update may fold two writers' changes).
	MetaDamaged bool
	// WrittenAt is when the controller's field manager alone made the newest write that
	// managedFields records (status aside), else zero: how a write whose answer was lost is told.
	WrittenAt time.Time
	Edits     []Edit // from the event's managedFields; none for a deletion
	// Likely is the newest other manager, for a change no entry records: managedFields times
	// are kept to the second, so a second write within a second leaves the entry as it was.
	Likely string
}

// Seen is the DaemonSet the view shows now, as Classify needs it.
type Seen struct {
	Present     bool
	UID         types.UID
	Generation  int64
	Terminating bool
	Version     string            // its resourceVersion
	Meta        map[string]string // its owned metadata
}

// Ownership tells the controller's own writes apart; resources.Manager keeps their record.
type Ownership interface {
	Owns(uid types.UID) bool
	IsOwnWrite(uid types.UID, generation int64) bool
	IsOwnMetadata(uid types.UID, resourceVersion string, meta map[string]string) bool
	ClaimUnanswered(o Observation) bool // o is an own write with its answer lost or yet to come, if WrittenAt says so
	AwaitsOwnWrite() bool               // an own write is yet to show in the cache
	ObservedDeletion(uid types.UID)     // the cache is to be believed: uid is gone ("": none found)
}

// Drain is what one drain of observations found.
type Drain struct {
	Kinds   []DriftKind // someone else's drift, each kind once, in order seen
	Edits   []Edit      // who made it
	Unnamed bool        // some of it no managedFields entry names
	Likely  []string    // for the unnamed part, each object's newest other manager: a guess, never shown
	Gone    bool        // an expected deletion (own, or in a state without the DaemonSet)
	Clean   bool        // the view shows the object as the controller wrote it: any repair owed is settled
}

// Classify decides which observations are someone else's drift; wantsOne: the machine's state wants a DaemonSet.
func (s *State) Classify(obs []Observation, seen Seen, own Ownership, wantsOne bool) Drain {
	d := Drain{Clean: seen.Present && !seen.Terminating && own.Owns(seen.UID) && own.IsOwnWrite(seen.UID, seen.Generation) &&
		own.IsOwnMetadata(seen.UID, seen.Version, seen.Meta)}
	awaiting := own.AwaitsOwnWrite()
	for _, o := range obs {
		switch o.Kind {
		case DriftModified, DriftMetadata:
			// Not drift: a change of an object since gone or being deleted (its deletion
			// is), an own write, or a metadata change the view shows undone by an own write.
			// A claim comes first, as the object's later deletion is then of an own object.
			ownWrite := o.Kind == DriftModified && (own.IsOwnWrite(o.UID, o.Generation) || own.ClaimUnanswered(o))
			if !seen.Present || seen.UID != o.UID || seen.Terminating || ownWrite && !o.MetaDamaged {
				continue
			}
			if ownWrite {
				o.Kind = DriftMetadata // the own write's new metadata is told apart below
			}
			if o.Kind == DriftMetadata && own.IsOwnMetadata(o.UID, o.Version, o.Meta) ||
				o.Kind == DriftMetadata && own.IsOwnMetadata(seen.UID, seen.Version, seen.Meta) {
				continue
			}
		case DriftDeleted:
			if o.UID == "" && awaiting {
				// A list without a DaemonSet may predate the awaited write (a lagging watch
				// cache). If the write is gone, the expectation's deadline re-reads.
				continue
			}
			own.ObservedDeletion(o.UID)
			// Only the object the controller still owns needs repair, not one it replaced, deleted or gave up.
			if o.Expected || slices.Contains(s.deleted, o.UID) || !wantsOne || !own.Owns(o.UID) {
				d.Gone = true
				continue
			}
		}
		switch {
		case o.Kind == DriftDeleted: // nothing to read: no one is named, no one guessed
			d.Likely = append(d.Likely, "")
		case len(o.Edits) == 0:
			d.Unnamed = true
			d.Likely = append(d.Likely, o.Likely)
		default:
			d.Edits = MergeEdits(d.Edits, o.Edits)
		}
		if !slices.Contains(d.Kinds, o.Kind) {
			d.Kinds = append(d.Kinds, o.Kind)
		}
	}
	return d
}

// MergeEdits adds es to a repair's edits: one per manager and operation at its newest time, newest first.
func MergeEdits(into, es []Edit) []Edit {
	for _, e := range es {
		i := slices.IndexFunc(into, func(x Edit) bool { return x.Manager == e.Manager && x.Operation == e.Operation })
		switch {
		case i < 0:
			into = append(into, e)
		case e.Time.After(into[i].Time):
			into[i] = e
		}
	}
	slices.SortStableFunc(into, func(a, b Edit) int { return b.Time.Compare(a.Time) })
	return into
}

// writers names d's writers for the gate: an unrecorded change is its likely writer's; none or "" is Unnamed.
func (d Drain) writers() []string {
	var names []string
	for _, e := range d.Edits {
		names = append(names, e.Manager)
	}
	return append(names, d.Likely...)
}

// Repair is what the next repair undoes, for its Event, log line and repairs_total; no part of the key.
type Repair struct {
	Kinds   []DriftKind
	Edits   []Edit // at most MaxNamedWriters: a client chooses its manager name
	Unnamed bool   // some of it no managedFields entry names
}

// NextRepair is what the next repair undoes.
func (s *State) NextRepair() Repair { return s.next }

// describe adds a drain's drift to the next repair, so that its Event names all outstanding drift.
func (s *State) describe(d Drain) {
	if len(d.Kinds) == 0 {
		return
	}
	if !s.Outstanding() {
		s.next = Repair{}
	}
	for _, k := range d.Kinds {
		if !slices.Contains(s.next.Kinds, k) {
			s.next.Kinds = append(s.next.Kinds, k)
		}
	}
	es := MergeEdits(s.next.Edits, d.Edits) // newest first
	s.next.Edits = es[:min(len(es), MaxNamedWriters)]
	s.next.Unnamed = s.next.Unnamed || d.Unnamed
}

package core

import "time"

// The front door coalesces level signals: the first after a quiet spell is acted on at once; those within LevelQuiet
// of the last action or of each other merge into one action on the latest level once they stop, or every
// LevelMaxDelay in an endless storm. So 200 config toggles cost a handful of writes, the last one acted on.
const (
	LevelQuiet    = 200 * time.Millisecond
	LevelMaxDelay = time.Second
)

// Signal says which levels a signal may have moved.
type Signal int

const (
	SignalConfig  Signal = 1 << iota // insights-config (or the host's config)
	SignalVersion                    // the cluster version (updateCh, ClusterVersion)
	SignalTLS                        // the cluster TLS profile
)

type door struct {
	lastAct     time.Time // when the last level action ended
	queued      Signal    // signals queued for the trailing edge
	queuedSince time.Time // the first queued signal
	lastSignal  time.Time // the latest queued signal
}

// admit reports whether a signal of kind k is acted on now (leading edge), else queues it for the trailing edge.
func (s *State) admit(k Signal, now time.Time) bool {
	d := &s.door
	if d.queued == 0 {
		if now.Sub(d.lastAct) >= LevelQuiet {
			return true
		}
		d.queuedSince, s.timers[PartDoor] = now, now.Add(LevelQuiet)
	}
	d.queued, d.lastSignal = d.queued|k, now
	return false
}

// Queued is what the door holds for its trailing edge.
func (s *State) Queued() Signal { return s.door.queued }

// take, at the door's deadline, returns and forgets the queued signals once due (see LevelQuiet), else re-arms it.
func (s *State) take(now time.Time) Signal {
	d := &s.door
	if d.queued == 0 {
		return 0
	}
	at := d.lastSignal.Add(LevelQuiet)
	if capAt := d.queuedSince.Add(LevelMaxDelay); capAt.Before(at) {
		at = capAt
	}
	if at.After(now) {
		s.timers[PartDoor] = at
		return 0
	}
	k := d.queued
	d.queued, s.timers[PartDoor] = 0, time.Time{}
	return k
}

// acted records the end of a level action; signals within LevelQuiet of it are queued.
func (s *State) acted(now time.Time) { s.door.lastAct = now }

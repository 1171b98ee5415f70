package runtimeextractor

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// RepairPolicy is the repair gate's rules (core.Policy).
type RepairPolicy = core.Policy

// DefaultRepairPolicy is core.DefaultPolicy: 6 repairs at once, one more a minute.
func DefaultRepairPolicy() RepairPolicy { return core.DefaultPolicy() }

// nextRepair is the drift the next repair undoes, for its Event, log and repairs_total.
type nextRepair struct {
	kinds   []DriftKind
	writers []writer // at most maxRepairWriters
	unnamed bool     // some of it no managedFields entry names
}

// maxRepairWriters: a client chooses its manager name, so one that churns
// names while a repair waits must not grow the description or repairs_total.
const maxRepairWriters = core.MaxNamedWriters

// describeRepair: outstanding drift adds up, so its repair's Event names it
// all; otherwise the drain's drift replaces what an earlier repair undid.
func (c *Controller) describeRepair(d drain) {
	next := &c.known.next
	switch {
	case len(d.kinds) == 0:
	case c.core.Outstanding():
		for _, k := range d.kinds {
			if !slices.Contains(next.kinds, k) {
				next.kinds = append(next.kinds, k)
			}
		}
		next.writers = capWriters(mergeWriters(next.writers, d.writers))
		next.unnamed = next.unnamed || d.unnamed
	default:
		*next = nextRepair{kinds: slices.Clone(d.kinds), writers: capWriters(slices.Clone(d.writers)), unnamed: d.unnamed}
	}
}

// capWriters keeps the newest: mergeWriters sorts newest first.
func capWriters(ws []writer) []writer { return ws[:min(len(ws), maxRepairWriters)] }

// writersOf names d's writers for the gate. A change no managedFields entry
// records is the newest other manager's, the likely writer (a second write
// within a second leaves its entry as it was), else the unnamed writer's.
func writersOf(d drain) []string {
	var names []string
	for _, e := range d.writers {
		names = append(names, e.manager)
	}
	likely := d.likely
	if len(d.kinds) == 0 || len(d.writers) == 0 && len(likely) == 0 {
		likely = append(likely, "")
	}
	for _, m := range likely {
		if m == "" {
			m = core.Unnamed
		}
		if !slices.Contains(names, m) {
			names = append(names, m)
		}
	}
	return names
}

// backoffNote says, for the log, why a repair waits.
func (c *Controller) backoffNote() string {
	now, p, log := c.cfg.clock.Now(), c.core.Policy(), c.core.Log()
	var undid []string
	for _, w := range log.Writers() {
		if len(w.Undos) > 0 {
			undid = append(undid, fmt.Sprintf("%s undid %d", w.Name, len(w.Undos)))
		}
	}
	note := fmt.Sprintf("%d of %d repairs left in the budget", p.Available(log, now), p.Burst)
	if len(undid) > 0 {
		note += "; " + strings.Join(undid, ", ")
	}
	return note
}

// waiting is the repair the budget holds back, for status; nil when none is,
// it waits only for quiet, or its wait ends within StatusMaxDelay: it could
// not be shown before it ended, and would cost two status writes for nothing.
func (c *Controller) waiting() *status.RepairWait {
	now, p, log := c.cfg.clock.Now(), c.core.Policy(), c.core.Log()
	if !c.core.Deferring() || !p.BudgetAllows(log, 1).After(now) {
		return nil
	}
	_, dec := p.Due(log, now)
	if dec.At.Sub(now) < StatusMaxDelay {
		return nil
	}
	w := &status.RepairWait{At: dec.At}
	for _, wr := range log.Writers() {
		if wr.Outstanding {
			w.Writers = append(w.Writers, wr.Name)
		}
	}
	return w
}

// conflict is the fights for status (nil for none), over the longest of them.
func (c *Controller) conflict() *status.ConflictingWriter {
	now := c.cfg.clock.Now()
	var out *status.ConflictingWriter
	for _, w := range c.core.Log().Writers() {
		if !w.Fight {
			continue
		}
		if out == nil {
			out = &status.ConflictingWriter{RepairEvery: c.core.Policy().Every}
		}
		out.Repairs += w.FightUndos
		out.For = max(out.For, now.Sub(w.FightSince))
		out.Writers = append(out.Writers, status.WriterCount{Manager: w.Name, Repairs: w.FightUndos})
	}
	if out != nil {
		slices.SortFunc(out.Writers, func(a, b status.WriterCount) int {
			return cmp.Or(cmp.Compare(b.Repairs, a.Repairs), cmp.Compare(a.Manager, b.Manager))
		})
	}
	return out
}

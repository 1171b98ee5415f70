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

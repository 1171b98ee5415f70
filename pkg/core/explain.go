package core

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/insights-runtime-extractor/controller/fsm"
)

// The Events and log lines name at most this many writers and restored fields; the rest are counted.
const maxNamedEditors, maxRestoredFields = 3, 4

// Cause is why an apply that wrote was made, for its Event.
type Cause struct {
	Transition           fsm.Transition
	Repair               bool     // it undid someone else's change (State.Outstanding), whatever event led to it
	Drift                Repair   // that change
	UpgradeFrom, Version string   // UpgradeFrom: the version before the current upgrade
	Reenabled            bool     // this controller deleted the DaemonSet before
	TLS                  string   // the TLS arguments the apply moved kube-rbac-proxy to
	Restored             []string // what a repair put back (resources.Result.Restored)
}

// cause is why an apply in transition t that wrote was made; repair: askWrite's verdict; tls: as in Cause.
func (s *State) cause(t fsm.Transition, repair bool, tls string) Cause {
	return Cause{Transition: t, Repair: repair, Drift: s.next, UpgradeFrom: s.upgradeFrom, Version: s.version,
		Reenabled: s.deletedAny, TLS: tls}
}

// Why is the Event's account of the apply: created, or updated.
func (c Cause) Why(created bool) string {
	at := ""
	if c.Version != "" {
		at = " at version " + c.Version
	}
	switch {
	case c.Repair && created:
		return "recreated after it was deleted by someone else" + at
	case c.Repair:
		return "repaired a change made by someone else (" + driftWords(c.Drift.Kinds) + restoredWords(c.Restored) + ")" + editorsWords(c.Drift.Kinds, c.Drift.Edits, c.Drift.Unnamed)
	case c.Transition.To == fsm.StateUpgrading && c.UpgradeFrom != "" && c.UpgradeFrom != c.Version:
		return fmt.Sprintf("version moved from %s to %s", c.UpgradeFrom, c.Version)
	case created && c.Reenabled:
		return "runtime extractor re-enabled by insights-config" + at
	case created:
		return "first deploy" + at
	case c.Transition.Event != nil && c.Transition.Event.Name() == fsm.EventVersionChanged:
		return "brought in line with version " + c.Version
	case c.TLS != "":
		return "kube-rbac-proxy follows the cluster TLS profile: " + c.TLS
	default:
		return "brought back to the desired spec (insights-config, images or TLS profile changed)"
	}
}

// kindWords says what drift kinds mean to an admin; another kind (deleted) says its name.
var kindWords = map[DriftKind]string{DriftModified: "spec changed", DriftMetadata: "owned label or annotation changed"}

func driftWords(kinds []DriftKind) string {
	words := make([]string, 0, len(kinds))
	for _, k := range kinds {
		words = append(words, cmp.Or(kindWords[k], string(k)))
	}
	return strings.Join(words, ", ")
}

// editorsWords says who made a repaired change; "" for a deletion only, which names no one.
func editorsWords(kinds []DriftKind, ws []Edit, unnamed bool) string {
	if len(ws) == 0 {
		if unnamed || slices.ContainsFunc(kinds, func(k DriftKind) bool { return k != DriftDeleted }) {
			return ", by a writer managedFields does not name"
		}
		return ""
	}
	names := make([]string, 0, maxNamedEditors)
	for _, w := range ws[:min(len(ws), maxNamedEditors)] {
		names = append(names, w.String())
	}
	out := ", changed by " + strings.Join(names, ", ")
	if n := len(ws) - maxNamedEditors; n > 0 {
		out += fmt.Sprintf(" and %d more", n)
	}
	if unnamed {
		out += " and a writer managedFields does not name"
	}
	return out
}

// Summary is what the log says about a drain's drift.
func Summary(kinds []DriftKind, ws []Edit, unnamed bool) string {
	if len(kinds) == 1 && kinds[0] == DriftDeleted {
		return "deleted by someone else"
	}
	return "changed by someone else (" + driftWords(kinds) + ")" + editorsWords(kinds, ws, unnamed)
}

// restoredWords is ": restored container extractor image, tolerations; removed container sidecar" ("" for none).
func restoredWords(fields []string) string {
	if len(fields) == 0 {
		return ""
	}
	var put, removed []string
	for _, f := range fields[:min(len(fields), maxRestoredFields)] {
		if name, ok := strings.CutPrefix(f, "removed "); ok {
			removed = append(removed, name)
		} else {
			put = append(put, f)
		}
	}
	var parts []string
	if len(put) > 0 {
		parts = append(parts, "restored "+strings.Join(put, ", "))
	}
	if len(removed) > 0 {
		parts = append(parts, "removed "+strings.Join(removed, ", "))
	}
	out := ": " + strings.Join(parts, "; ")
	if n := len(fields) - maxRestoredFields; n > 0 {
		out += fmt.Sprintf(" and %d more", n)
	}
	return out
}

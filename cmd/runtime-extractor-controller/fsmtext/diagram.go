package fsmtext

import (
	"cmp"
	_ "embed"
	"fmt"
	"slices"
	"strings"

	"github.com/insights-runtime-extractor/controller/fsm"
)

// edge groups the table rows that share (from, to, action) into one diagram arrow.
type edge struct {
	from, to fsm.State
	action   fsm.Action
	events   []string
}

// edges returns the rows that change state or ask for an action: the idle self-loops
// would bury the diagram (the Markdown table has them).
func edges() []edge {
	order := func(s fsm.State) int { return slices.Index(fsm.States(), s) }
	rows := fsm.Table()
	slices.SortStableFunc(rows, func(a, b fsm.Row) int {
		return cmp.Or(cmp.Compare(order(a.From), order(b.From)),
			cmp.Compare(order(a.To), order(b.To)), cmp.Compare(a.Action, b.Action))
	})
	var out []edge
	for _, r := range rows {
		if r.From == r.To && r.Action == fsm.ActionNone {
			continue
		}
		if n := len(out) - 1; n >= 0 && out[n].from == r.From && out[n].to == r.To && out[n].action == r.Action {
			out[n].events = append(out[n].events, string(r.Event))
			continue
		}
		out = append(out, edge{from: r.From, to: r.To, action: r.Action, events: []string{string(r.Event)}})
	}
	return out
}

func (e edge) label() string {
	l := strings.Join(e.events, ", ")
	if e.action != fsm.ActionNone {
		l += " / " + string(e.action)
	}
	return l
}

// Mermaid renders the machine as a Mermaid stateDiagram-v2.
func Mermaid() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stateDiagram-v2\n    [*] --> %s\n", fsm.StateDisabled)
	for _, e := range edges() {
		fmt.Fprintf(&b, "    %s --> %s: %s\n", e.from, e.to, e.label())
	}
	return b.String()
}

// DOT renders the machine as a Graphviz digraph.
func DOT() string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph runtime_extractor {\n    rankdir=LR;\n    node [shape=box, style=rounded];\n"+
		"    start [shape=point];\n    start -> %s;\n", fsm.StateDisabled)
	for _, s := range fsm.States() {
		fmt.Fprintf(&b, "    %s;\n", s)
	}
	for _, e := range edges() {
		fmt.Fprintf(&b, "    %s -> %s [label=%q];\n", e.from, e.to, e.label())
	}
	b.WriteString("}\n")
	return b.String()
}

// markdownTable renders the whole table, states down and events across.
func markdownTable() string {
	var b strings.Builder
	b.WriteString("| from \\ event |")
	for _, ev := range fsm.EventNames() {
		fmt.Fprintf(&b, " %s |", ev)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(fsm.EventNames())) + "\n")
	rows := map[[2]string]fsm.Row{}
	for _, r := range fsm.Table() {
		rows[[2]string{string(r.From), string(r.Event)}] = r
	}
	for _, s := range fsm.States() {
		fmt.Fprintf(&b, "| **%s** |", s)
		for _, ev := range fsm.EventNames() {
			r := rows[[2]string{string(s), string(ev)}]
			action := "–"
			if r.Action != fsm.ActionNone {
				action = string(r.Action)
			}
			fmt.Fprintf(&b, " %s / %s |", r.To, action)
		}
		b.WriteString("\n")
	}
	return b.String()
}

//go:embed state-machine-intro.md
var documentIntro string

// Document renders docs/state-machine.md: the Mermaid diagram and the full table.
func Document() string {
	return "<!-- Generated from fsm.Table by `make docs`; do not edit. -->\n" +
		documentIntro + "\n```mermaid\n" + Mermaid() + "```\n\n## Transition table\n\n" + markdownTable()
}

package fsm

import (
	_ "embed"
	"fmt"
	"sort"
	"strings"
)

// edge groups the table rows that share (from, to, action) into one diagram arrow.
type edge struct {
	from, to State
	action   Action
	events   []string
}

// edges returns the diagram's arrows: every row that changes state or asks for an
// action. Rows that stay put and do nothing are in the Markdown table only; drawn,
// they would bury the diagram in self-loops.
func edges() []edge {
	index := map[[3]string]int{}
	var out []edge
	for _, r := range table {
		if r.From == r.To && r.Action == ActionNone {
			continue
		}
		k := [3]string{string(r.From), string(r.To), string(r.Action)}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, edge{from: r.From, to: r.To, action: r.Action})
		}
		out[i].events = append(out[i].events, string(r.Event))
	}
	order := map[State]int{}
	for i, s := range States() {
		order[s] = i
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].from != out[j].from {
			return order[out[i].from] < order[out[j].from]
		}
		if out[i].to != out[j].to {
			return order[out[i].to] < order[out[j].to]
		}
		return out[i].action < out[j].action
	})
	return out
}

func (e edge) label() string {
	l := strings.Join(e.events, ", ")
	if e.action != ActionNone {
		l += " / " + string(e.action)
	}
	return l
}

// Mermaid renders the machine as a Mermaid stateDiagram-v2.
func Mermaid() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	fmt.Fprintf(&b, "    [*] --> %s\n", StateDisabled)
	for _, e := range edges() {
		fmt.Fprintf(&b, "    %s --> %s: %s\n", e.from, e.to, e.label())
	}
	return b.String()
}

// DOT renders the machine as a Graphviz digraph.
func DOT() string {
	var b strings.Builder
	b.WriteString("digraph runtime_extractor {\n")
	b.WriteString("    rankdir=LR;\n    node [shape=box, style=rounded];\n")
	b.WriteString("    start [shape=point];\n")
	fmt.Fprintf(&b, "    start -> %s;\n", StateDisabled)
	for _, s := range States() {
		fmt.Fprintf(&b, "    %s;\n", s)
	}
	for _, e := range edges() {
		fmt.Fprintf(&b, "    %s -> %s [label=%q];\n", e.from, e.to, e.label())
	}
	b.WriteString("}\n")
	return b.String()
}

// MarkdownTable renders the whole table, states down and events across; each cell is
// "Next / Action", with "–" for no action.
func MarkdownTable() string {
	cells := map[rowKey]Row{}
	for _, r := range table {
		cells[rowKey{r.From, r.Event}] = r
	}
	var b strings.Builder
	b.WriteString("| from \\ event |")
	for _, ev := range EventNames() {
		fmt.Fprintf(&b, " %s |", ev)
	}
	b.WriteString("\n|---|")
	for range EventNames() {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, s := range States() {
		fmt.Fprintf(&b, "| **%s** |", s)
		for _, ev := range EventNames() {
			r := cells[rowKey{s, ev}]
			action := "–"
			if r.Action != ActionNone {
				action = string(r.Action)
			}
			fmt.Fprintf(&b, " %s / %s |", r.To, action)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// documentIntro is the prose of docs/state-machine.md above the diagram; it lives
// in a Markdown file so that it is read and edited as Markdown.
//
//go:embed state-machine-intro.md
var documentIntro string

// Document renders docs/state-machine.md: the Mermaid diagram and the full table.
func Document() string {
	return "<!-- Generated from fsm.Table by `make docs`; do not edit. -->\n" +
		documentIntro + "\n```mermaid\n" + Mermaid() + "```\n\n## Transition table\n\n" + MarkdownTable()
}

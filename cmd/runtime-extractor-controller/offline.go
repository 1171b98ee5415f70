package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/insights-runtime-extractor/controller/cmd/runtime-extractor-controller/fsmtext"
	"github.com/insights-runtime-extractor/controller/fsm"
)

func newSimulateCommand() *cobra.Command {
	var initial string
	cmd := &cobra.Command{
		Use:   "simulate [FILE | -] | simulate EVENT...",
		Short: "Play an event sequence on the state machine and print every transition and action",
		Long: `Plays events on the state machine, offline, and prints the transcript in the
testdata/fsm scenario format. Read a scenario file (or - for standard input), or give
the events as arguments, one per argument, e.g.:

  runtime-extractor-controller simulate Enabled "Applied 1" "RolloutComplete 1"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := scenarioFromArgs(cmd.InOrStdin(), args)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("initial") {
				if sc.Initial, err = fsmtext.ParseState(initial); err != nil {
					return err
				}
			}
			ts, err := sc.Run()
			fmt.Fprint(cmd.OutOrStdout(), fsmtext.Transcript(sc.Initial, ts))
			return err
		},
	}
	cmd.Flags().StringVar(&initial, "initial", string(fsm.StateDisabled), "initial state (overrides the file's)")
	return cmd
}

func scenarioFromArgs(stdin io.Reader, args []string) (*fsmtext.Scenario, error) {
	switch {
	case len(args) == 1 && args[0] == "-":
		return fsmtext.ParseScenario(stdin)
	case len(args) == 1 && fileExists(args[0]):
		raw, err := os.ReadFile(args[0])
		if err != nil {
			return nil, fmt.Errorf("read scenario: %w", err)
		}
		return fsmtext.ParseScenario(bytes.NewReader(raw))
	case len(args) == 0:
		return nil, fmt.Errorf("give a scenario file, - for standard input, or events")
	}
	return fsmtext.ParseScenario(strings.NewReader(strings.Join(args, "\n")))
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func newDiagramCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "diagram",
		Short: "Print the state machine diagram rendered from the transition table",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			switch format {
			case "mermaid":
				fmt.Fprint(out, fsmtext.Mermaid())
			case "dot":
				fmt.Fprint(out, fsmtext.DOT())
			case "markdown":
				fmt.Fprint(out, fsmtext.Document())
			default:
				return fmt.Errorf("unknown format %q: want mermaid, dot or markdown", format)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "mermaid", "mermaid, dot, or markdown (the docs/state-machine.md page)")
	return cmd
}
